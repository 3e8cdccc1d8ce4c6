"""`python -m sim`'s files and options: no command writes over a file it reads, or two outputs
over each other; a mistyped option is one line; an input without end (/dev/zero) stops at a
limit; options a command does not use are named on stderr, not dropped without a word."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from sim.__main__ import main
from sim.workload import Request, Workload

ROOT = Path(__file__).resolve().parents[1]
KIT = ROOT / "tests" / "fixtures" / "fleet" / "kit-vllm-cache_aware-tokens"


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "sim", *args], cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.fixture
def workload(tmp_path) -> Path:
    p = tmp_path / "w.json"
    p.write_text(Workload([Request(id=f"r{i}", prompt_len=40, max_tokens=4, arrival_time=10.0 * i)
                          for i in range(6)], {"num_gpu_blocks": 64}).dumps())
    return p


@pytest.mark.parametrize("args", [
    ("run", "{w}", "-o", "{w}"),
    ("fleet", "{w}", "--replicas", "2", "-o", "{w}"),
    ("fleet", "{w}", "--routes-csv", "{w}"),
    ("trace", "{w}", "-o", "{w}"),
])
def test_an_output_that_is_an_input_is_refused_and_the_input_kept(workload, args):
    before = workload.read_bytes()
    r = _cli(*(a.format(w=workload) for a in args))
    assert r.returncode != 0 and r.stderr.strip().endswith("is an input of this command: writing it would destroy it")
    assert "Traceback" not in r.stderr and workload.read_bytes() == before


def test_the_same_input_by_another_name_is_caught(workload, tmp_path):
    link = tmp_path / "again.json"
    link.symlink_to(workload)
    r = _cli("run", str(workload), "-o", str(link))
    assert r.returncode != 0 and "is an input of this command" in r.stderr


def test_two_outputs_of_one_file_and_an_empty_name_are_refused(workload, tmp_path):
    out = tmp_path / "x.out"
    r = _cli("fleet", str(workload), "-o", str(out), "--chrome", str(out))
    said = f"--chrome and --out name the same file ({out}): give each output its own"
    assert r.returncode != 0 and r.stderr.strip() == said
    assert not out.exists()
    r = _cli("fleet", str(workload), "-o", "")
    assert r.returncode != 0 and r.stderr.strip() == "--out needs a file name"
    r = _cli("fleet", str(workload), "-o", str(out), "--routes-csv", str(tmp_path / "r.csv"))   # distinct: written
    assert r.returncode == 0 and out.stat().st_size and (tmp_path / "r.csv").read_text().startswith("request,")


def test_a_mistyped_option_is_one_line(workload):
    for args in (("fleet", str(workload), "--replicas", "abc"), ("run", str(workload), "--cost", "nope"), ()):
        r = _cli(*args)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "usage:" not in r.stderr, r.stderr
        assert lines[0].startswith("python -m sim") and lines[0].endswith("(--help lists the options)")


def test_an_endless_workload_stops_at_the_limit(tmp_path, monkeypatch, capsys):
    import sim.public_traces
    monkeypatch.setattr(sim.public_traces, "MAX_UNZIPPED_BYTES", 1 << 20)
    big = tmp_path / "big.json"
    big.write_bytes(b" " * ((1 << 20) + 1))
    with pytest.raises(SystemExit) as e:
        main(["run", str(big)])
    assert str(e.value) == f"cannot read workload {big}: it is over 1 MB, more than such a file read here may be"
    r = _cli("fleet", "/dev/zero", "--json")   # the real limit: read up to it, not into a MemoryError
    assert r.returncode != 0 and "cannot read workload /dev/zero: it is over 1 GiB" in r.stderr


def test_options_a_command_does_not_use_are_named(workload):
    r = _cli("run", str(workload), "--limit", "3", "--rate-scale", "2")
    assert r.returncode == 0
    assert "warning: --limit, --rate-scale apply to public traces, not to a workload JSON: ignored" in r.stderr
    r = _cli("fleet", str(workload), "--tokenizer", "t.json", "--timing", "simulated")
    assert r.returncode == 0 and "warning: --tokenizer, --timing do not apply to a simulated fleet" in r.stderr
    recs = [str(KIT / "rec-8101.jsonl.gz"), str(KIT / "rec-8102.jsonl.gz")]
    r = _cli("fleet", "--recordings", *recs, "--replicas", "5", "--cost", "units", "--json")
    assert r.returncode == 0
    assert "warning: --replicas, --cost do not apply to a real fleet's recordings" in r.stderr
    r = _cli("fleet", "--recordings", *recs, "--router", "cache_aware", "--json")   # all used: no warning
    assert r.returncode == 0 and "do not apply" not in r.stderr and "does not apply" not in r.stderr


def test_search_reads_its_files_as_every_command_does(workload, tmp_path):
    """sim search: a grid or SLO file without end stops at the JSON limit, a name that is no file
    is said to be none (it was read as bad JSON), a byte-order mark is fine, and --limit with a
    workload JSON is named, as `sim run` and `sim fleet` do."""
    out = str(tmp_path / "o.csv")
    r = _cli("search", str(workload), "--grid", "/dev/zero", "--workers", "1", "-o", out)
    said = "cannot read the grid file /dev/zero: it is over 150 MB, more than such a file read here may be"
    assert r.returncode != 0 and r.stderr.strip() == said
    r = _cli("search", str(workload), "--grid", str(tmp_path / "nowhere.json"), "--workers", "1", "-o", out)
    assert r.returncode != 0 and r.stderr.strip().startswith("there is no grid file")
    grid = tmp_path / "g.json"
    grid.write_bytes(b"\xef\xbb\xbf" + b'{"max_num_seqs": [2, 4]}')
    r = _cli("search", str(workload), "--grid", str(grid), "--workers", "1", "--limit", "3", "-o", out, "--quiet")
    assert r.returncode == 0, r.stderr
    assert "warning: --limit applies to public traces, not to a workload JSON: ignored" in r.stderr
    assert len(Path(out).read_text().splitlines()) == 3


def test_a_setting_given_twice_is_refused_not_settled_by_the_last(workload, tmp_path):
    twice = '{"key":"request","key":"tenant"}'
    r = _cli("fleet", str(workload), "--router", "consistent_hash", "--router-config", twice)
    assert r.returncode != 0 and r.stderr.strip() == "--router-config: it names 'key' twice in one object; give each " \
                                                     "setting once"
    grid = tmp_path / "g.json"
    grid.write_text('{"replicas": [1], "replicas": [2, 3]}')
    r = _cli("search", str(workload), "--grid", str(grid), "--workers", "1", "-o", str(tmp_path / "o.csv"))
    assert r.returncode != 0 and "the grid names 'replicas' twice in one object" in r.stderr
