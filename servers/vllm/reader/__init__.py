"""The reader of vLLM step recordings, one concern per file (its public face is
servers/vllm/recording.py: read_recording, RecordingStream, to_trace, ...):

- source.py:  a file's bytes as batches of complete lines, one pass, bounded (gzip bombs, endless
              lines), read ahead in a thread; progress from the file's bytes;
- lines.py:   one line checked (the recorder's fast path, the per-value checks behind it), the
              header's checks, the sentence for a file that is no recording;
- stream.py:  Recording, RecordingStream (lines in, the Recording and its Trace so far out) and
              read_all (a whole file through one);
- steps.py:   the step lines kept as they came, read back as step dicts (Recording.steps);
- replay.py:  the state each line changes (slots, preemptions, finishes, KV blocks) and the
              entries in flat buffers, as the lines come;
- tables.py:  the Trace's tables from those buffers, with numpy;
- gcpause.py: the garbage collector paused while lines are read.
"""
