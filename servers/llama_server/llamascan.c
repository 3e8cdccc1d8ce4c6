/* The llama-server log tokenizer: finds the reader's records in a block of log bytes.
 *
 * The reader is the Python package around this file. Its reference tokenizer is three regular
 * expressions (lines.py), one per line family ("slot ", "srv  ", "que  "); this file finds the
 * same records without a regex engine and parses the fields of the frequent ones (one or more per
 * model call), so that Python only runs the reader's state machine. Every other candidate is handed back as SLOW: Python runs the
 * family's regex at that position, so the rare lines keep one definition.
 *
 * Contract with the reader (the reader's tests parse every input with both tokenizers and
 * compare the Traces, fuzzed and mutated logs included; tests/servers/llama_server/test_llamascan.py):
 * - a candidate is an occurrence of a family literal; when `guarded`, only where the regex's
 *   lookbehind allows it (after a line end, a level letter, the chat parser's sentence or an ANSI
 *   reset);
 * - a hot kind is claimed only when its regex alternative matches in full, and no earlier
 *   alternative of the family could; anything in doubt is SLOW;
 * - a message the reader knows and ignores is claimed as IGN: it counts as a record, no more;
 * - the scan resumes after a claimed record's end, as re.finditer does; after a SLOW candidate it
 *   resumes after the literal, and Python drops candidates inside the span the regex matched;
 * - ts is the `M.SS.mmm.uuu L ` prefix in ms, computed with the same double operations as
 *   the reader's _ts (scan.py) and lines.TS (minutes of 1-6 digits), or -1 where that needs Python
 *   (colours, odd digits, none);
 * - llamastrip (at the end) takes collectors' line prefixes off a block first, as prefixes.py does.
 *
 * Build: cc -O2 -shared -fPIC -ffp-contract=off (native.py does it once and caches the .so).
 */
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum {
    K_TOK = 1, K_DEC, K_POST, K_EFF, K_YDONE, K_DBATCH, K_RUNS,
    K_IGN_SLOT, K_IGN_SRV,                /* records the reader ignores: counted only */
    K_SLOW_SLOT, K_SLOW_SRV, K_SLOW_QUE   /* Python's regex decides */
};

#define LIT(s) (s), (sizeof(s) - 1)

static int has(const uint8_t *d, int64_t lim, int64_t p, const char *s, int64_t len) {
    return p + len <= lim && memcmp(d + p, s, (size_t)len) == 0;
}

static int digit(uint8_t c) { return c >= '0' && c <= '9'; }

/* \d{1,maxd}: greedy; returns the position after the digits, or -1 */
static int64_t digits(const uint8_t *d, int64_t lim, int64_t p, int maxd, int64_t *val) {
    int64_t v = 0, q = p;
    while (q < lim && q - p < maxd && digit(d[q])) v = v * 10 + (d[q++] - '0');
    if (q == p) return -1;
    *val = v;
    return q;
}

/* -?\d{1,15} */
static int64_t sdigits(const uint8_t *d, int64_t lim, int64_t p, int64_t *val) {
    int neg = p < lim && d[p] == '-';
    int64_t q = digits(d, lim, p + neg, 15, val);
    if (q < 0) return -1;
    if (neg) *val = -*val;
    return q;
}

/* \d{1,15} followed by a literal: more digits than 15 fail, as the regex's backtracking does */
static int64_t digits_then(const uint8_t *d, int64_t lim, int64_t p, int64_t *val, const char *s, int64_t len) {
    int64_t q = digits(d, lim, p, 15, val);
    if (q < 0 || !has(d, lim, q, s, len)) return -1;
    return q + len;
}

static int64_t spaces1(const uint8_t *d, int64_t lim, int64_t p) {   /* " +" */
    int64_t q = p;
    while (q < lim && d[q] == ' ') q++;
    return q > p ? q : -1;
}

static int level(uint8_t c) { return c == 'D' || c == 'I' || c == 'W' || c == 'E' || c == 'T'; }

static int guard_ok(const uint8_t *d, int64_t p) {
    if (p >= 1 && d[p - 1] == '\n') return 1;
    if (p >= 3 && d[p - 1] == ' ' && level(d[p - 2])
        && (d[p - 3] == '\n' || d[p - 3] == ' ' || d[p - 3] == 'm' || d[p - 3] == '.')) return 1;
    if (p >= 7 && memcmp(d + p - 7, "parser.", 7) == 0) return 1;
    if (p >= 4 && memcmp(d + p - 4, "\x1b[0m", 4) == 0) return 1;
    return 0;
}

/* LlamaLogReader._ts's common case: `M.SS.mmm.uuu L ` right before s, one digit of minutes */
static double stamp(const uint8_t *d, int64_t s) {
    if (s < 15 || d[s - 1] != ' ' || d[s - 3] == 'm') return -1.0;
    const uint8_t *g = d + s - 15;
    if (g[1] != '.' || g[4] != '.' || g[8] != '.' || !digit(g[0])) return -1.0;
    static const int at[] = {2, 3, 5, 6, 7, 9, 10, 11};
    for (int i = 0; i < 8; i++)
        if (!digit(g[at[i]])) return -1.0;   /* float() would take " 5", "+5", "1_0": Python decides */
    if (s > 15 && digit(d[s - 16])) {
        /* minutes of more than one digit: lines.TS's search (at most 6, the last ones, from s - 32 on)
           and lines.prefix_ms's operations */
        if (d[s - 2] < 'A' || d[s - 2] > 'Z') return -1.0;
        int64_t lo = s > 32 ? s - 32 : 0, q = s - 15;
        while (q > lo && digit(d[q - 1]) && s - 14 - q < 6) q--;
        int64_t minutes = 0;
        for (int64_t k = q; k <= s - 15; k++) minutes = minutes * 10 + (d[k] - '0');
        int64_t sec = (g[2] - '0') * 10 + (g[3] - '0');
        double ms = (double)((g[5] - '0') * 100 + (g[6] - '0') * 10 + (g[7] - '0'));
        double us = (double)((g[9] - '0') * 100 + (g[10] - '0') * 10 + (g[11] - '0'));
        return (double)(minutes * 60 + sec) * 1000.0 + ms + us * 0.001;
    }
    double sec = (double)((g[2] - '0') * 10 + (g[3] - '0'));
    double ms = (double)((g[5] - '0') * 100 + (g[6] - '0') * 10 + (g[7] - '0'));
    double us = (double)((g[9] - '0') * 100 + (g[10] - '0') * 10 + (g[11] - '0'));
    return (double)(g[0] - '0') * 60000.0 + sec * 1000.0 + ms + us * 0.001;
}

static int starts_any(const uint8_t *d, int64_t lim, int64_t p, const char *const *list) {
    for (; *list; list++)
        if (has(d, lim, p, *list, (int64_t)strlen(*list))) return 1;
    return 0;
}

/* the first literal of every slot alternative but the catch-all; "eval time" after spaces too.
   The "prompt ..." ones in full: -v logs print a "prompt token" line per prompt token (ignored). */
static const char *const SLOT_ALTS[] = {
    "slot decode token", "n_gen", "n_decoded", "cached n_tokens", "n_tokens", "n_past", "kv cache rm",
    "prompt processing progress", "prompt processing done", "prompt done", "prompt eval time",
    "init sampler", "new ", "stop", "processing task", "launching slot", "generate_draft",
    "slot context shift", "input truncated", "need to evaluate", "\r", "\n", 0};
/* lines.IGNORED_SLOT and IGNORED_SRV */
static const char *const IGNORED_SLOT[] = {
    "selected slot", "- ", "sampler chain", "sampler params", "saving idle slot", "__TEST_TAG",
    "clearing prompt", "main/do_checkpoint", "graphs reused", "total time", "n_gen =", "n_decoded =",
    "prompt token", "created context checkpoint", "erased invalidated", "restored context checkpoint",
    "prompt processing, n_tokens", "max possible draft", "reusing chunk", "n_past was set to",
    "draft acceptance", "new slot", "cache state", "\r", "\n", "restored", "saved", "checkpoint",
    "trying to reuse", "after context reuse",
    "waiting for parent slot", "accepted ", "add accepted tokens", "created speculative checkpoint",
    "restoring speculative checkpoint", "acc per pos", "erasing ", "superseding", "checking checkpoint",
    "appended ", "encoding mtmd", "try adding media", "selected empty slot", "radix alias",
    "cache reuse is not supported", "empty prompt", 0};
static const char *const IGNORED_SRV[] = {
    "all slots are idle", "run slots completed", "posting", "decoding batch", "no tokens to decode", 0};
static const char *const UPDATE_SLOTS_ERRS[] = {
    "failed to ", "Context size has been exceeded", "Invalid input batch", "Compute error", "decode()",
    "pre_decode()", "post_decode()", 0};

typedef struct {
    int32_t kind;
    int64_t end;            /* where the scan resumes */
    int64_t a, b, c, e;
} rec_t;

/* the slot family at p ("slot " matched): 0 = not a record */
static int slot_rec(const uint8_t *d, int64_t n, int64_t lim, int64_t p, rec_t *r) {
    int64_t q = p + 5, sid, tid, v, w;
    if (q + 12 > lim || memchr(d + q, '\n', 12)) return 0;
    q += 12;
    if (!has(d, lim, q, LIT(": id"))) return 0;
    if ((q = spaces1(d, lim, q + 4)) < 0) return 0;
    if ((q = digits_then(d, lim, q, &sid, LIT(" | task "))) < 0) return 0;
    if ((q = sdigits(d, lim, q, &tid)) < 0 || !has(d, lim, q, LIT(" | "))) return 0;
    int64_t m = q + 3;   /* the message */
    r->a = sid;
    r->b = tid;
    r->kind = K_SLOW_SLOT;
    r->end = p + 5;
    if (has(d, lim, m, LIT("slot decode token, "))) {
        int64_t x = m + 19, flags = 0;
        if (has(d, lim, x, LIT("id="))) {
            x += 3;
            if (x < lim && d[x] == '-') x++;
            int64_t y = x;
            while (y < lim && digit(d[y])) y++;
            if (y == x || !has(d, lim, y, LIT(", "))) return 1;
            x = y + 2;
            flags |= 2;
        }
        if (!has(d, lim, x, LIT("n_ctx = "))) return 1;
        int64_t y = x + 8;
        while (y < lim && digit(d[y])) y++;
        if (y == x + 8 || !has(d, lim, y, LIT(", n_"))) return 1;
        y += 4;
        if (has(d, lim, y, LIT("past = "))) { flags |= 1; y += 7; }
        else if (has(d, lim, y, LIT("tokens = "))) y += 9;
        else return 1;
        if ((y = digits(d, lim, y, 15, &v)) < 0) return 1;
        r->kind = K_DEC; r->c = v; r->e = flags; r->end = y;
        return 1;
    }
    if (has(d, lim, m, LIT("n_gen =")) || has(d, lim, m, LIT("n_decoded ="))) {
        int64_t x = m + (d[m + 2] == 'g' ? 7 : 11);
        if ((x = spaces1(d, lim, x)) < 0) return 1;
        if ((x = digits_then(d, lim, x, &v, LIT(", n_remaining ="))) < 0) return 1;
        if ((x = spaces1(d, lim, x)) < 0) return 1;
        if ((x = sdigits(d, lim, x, &w)) < 0 || !has(d, lim, x, LIT(", next token"))) return 1;
        r->kind = K_TOK; r->c = v; r->e = w; r->end = x + 12;
        return 1;
    }
    if (starts_any(d, lim, m, SLOT_ALTS)) return 1;
    int64_t x = m;
    while (x < lim && d[x] == ' ') x++;
    if (has(d, lim, x, LIT("eval time"))) return 1;
    /* the catch-all alternative: the reader ignores it when the message (40 bytes of the block,
       spaces stripped) is empty or starts with a known prefix */
    int64_t wend = m + 40 < n ? m + 40 : n;
    x = m;
    while (x < wend && d[x] == ' ') x++;
    if (x == wend || starts_any(d, wend, x, IGNORED_SLOT)) {
        r->kind = K_IGN_SLOT;
        r->end = m;
    }
    return 1;
}

static int srv_rec(const uint8_t *d, int64_t n, int64_t lim, int64_t p, rec_t *r) {
    int64_t q = p + 5, v, w;
    r->kind = K_SLOW_SRV;
    r->end = p + 5;
    if (has(d, lim, q, LIT("update_slots: "))) {
        int64_t m = q + 14;
        if (has(d, lim, m, LIT("posting NEXT_RESPONSE"))) {
            r->kind = K_POST; r->end = m + 21;
        } else if (has(d, lim, m, LIT("decoding batch, n_tokens = "))) {
            int64_t x = digits(d, lim, m + 27, 15, &v);
            if (x >= 0) { r->kind = K_DBATCH; r->c = v; r->end = x; }
        } else if (has(d, lim, m, LIT("run slots completed"))) {
            r->kind = K_RUNS; r->end = m + 19;
        } else if (!starts_any(d, lim, m, UPDATE_SLOTS_ERRS)) {
            int64_t wend = m + 40 < n ? m + 40 : n;
            if (starts_any(d, wend, m, IGNORED_SRV)) { r->kind = K_IGN_SRV; r->end = m; }
        }
        return 1;
    }
    if (has(d, lim, q, LIT("      decode: "))) {
        int64_t m = q + 14, x;
        if (has(d, lim, m, LIT("n_batch (effective) = "))
            && (x = digits_then(d, lim, m + 22, &v, LIT(", off = "))) >= 0
            && (x = digits(d, lim, x, 15, &w)) >= 0) {
            r->kind = K_EFF; r->c = w; r->e = v; r->end = x;
        } else if (has(d, lim, m, LIT("no tokens to decode"))) {
            r->kind = K_IGN_SRV; r->end = m;
        }
        return 1;
    }
    if (has(d, lim, q, LIT("process_sing: ")))   /* the three reasons to defer (lines.py) */
        return has(d, lim, q + 14, LIT("no slot is available, defer task, id_task = "))
            || has(d, lim, q + 14, LIT("requested slot is unavailable, defer task, id_task = "))
            || has(d, lim, q + 14, LIT("not enough free slots for child tasks, n_free = "));
    if (has(d, lim, q, LIT("        stop: ")) || has(d, lim, q, LIT("cancel_tasks: ")))
        return has(d, lim, q + 14, LIT("cancel task, id_task = "));
    return has(d, lim, q, LIT("  send_error: ")) || has(d, lim, q, LIT("  load_model: "))
        || has(d, lim, q, LIT("        init: "));
}

static int que_rec(const uint8_t *d, int64_t lim, int64_t p, rec_t *r) {
    int64_t q = p + 5, v;
    if (has(d, lim, q, LIT("yield_to_que: done yielding"))) {
        r->kind = K_YDONE; r->end = q + 27;
        return 1;
    }
    r->kind = K_SLOW_QUE;
    r->end = p + 5;
    if (has(d, lim, q, LIT("pop_deferred: pop deferred task, id_task = "))
        || has(d, lim, q, LIT("pop_deferred: pop deferred task (use slot "))) return 1;
    if (!has(d, lim, q, LIT("        post: new task, id = "))) return 0;
    int64_t x = digits_then(d, lim, q + (int64_t)sizeof("        post: new task, id = ") - 1, &v, LIT("/"));
    if (x < 0 || x >= lim || !digit(d[x])) return 0;
    while (x < lim && digit(d[x])) x++;
    return has(d, lim, x, LIT(", front = 0"));
}

/* One record as Python reads it (struct format "=6qd": native order, no padding): kind, start,
 * the fields a, b, c, e, and ts. */
typedef struct { int64_t kind, pos, a, b, c, e; double ts; } out_t;

static int maybe_prefixed(const uint8_t *d, int64_t ls, int64_t end);

/* Scans d[0:end] (n = len(d); the ignore windows may look past end, as the reader's slices do).
 * Writes up to cap records; returns their number, or -1 when cap is too small.
 * stats[0]: candidates of `srv  load_model:` (the reader then looks for start-up lines).
 * stats[1] on entry: nonzero to stop, returning -2, at the first line that may carry a
 * collector's prefix (the reader then takes the prefixes off, llamastrip, and scans again: a log
 * without them is never passed over twice); on return the start of that line, or -1. */
int64_t llamascan(const uint8_t *d, int64_t n, int64_t end, int32_t guarded, int64_t cap,
                  out_t *out, int64_t *stats) {
    int64_t from[3] = {0, 0, 0}, k = 0;
    int detect = stats[1] != 0;
    stats[0] = 0;
    stats[1] = -1;
    /* Every family literal starts with 's' or 'q' and has a space at [4]: test 16 positions at a
       time for that (SSE2), then compare the whole literal where it holds. */
    for (int64_t i = 0; i + 5 <= end;) {
        uint32_t mask;
        int64_t base = i;
#ifdef __SSE2__
        if (i + 20 <= end) {
            __m128i a = _mm_loadu_si128((const __m128i *)(d + i));
            __m128i b = _mm_loadu_si128((const __m128i *)(d + i + 4));
            __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8('s')), _mm_cmpeq_epi8(a, _mm_set1_epi8('q')));
            mask = (uint32_t)_mm_movemask_epi8(_mm_and_si128(hit, _mm_cmpeq_epi8(b, _mm_set1_epi8(' '))));
            if (detect)
                for (uint32_t nl = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(a, _mm_set1_epi8('\n'))); nl; nl &= nl - 1)
                    if (maybe_prefixed(d, base + __builtin_ctz(nl) + 1, end)) {
                        stats[1] = base + __builtin_ctz(nl) + 1;
                        return -2;
                    }
            i += 16;
        } else
#endif
        {
            mask = (d[i] == 's' || d[i] == 'q') && d[i + 4] == ' ';
            if (detect && d[i] == '\n' && maybe_prefixed(d, i + 1, end)) {
                stats[1] = i + 1;
                return -2;
            }
            i += 1;
        }
        for (; mask; mask &= mask - 1) {
            int64_t p = base + __builtin_ctz(mask);
            int f = memcmp(d + p, "slot ", 5) == 0 ? 0 : memcmp(d + p, "srv  ", 5) == 0 ? 1
                  : memcmp(d + p, "que  ", 5) == 0 ? 2 : -1;
            if (f < 0 || p < from[f]) continue;   /* inside this family's last record: finditer skips it */
            rec_t r = {0, p + 5, 0, 0, 0, 0};
            if (guarded && !guard_ok(d, p)) continue;
            int found = f == 0 ? slot_rec(d, n, end, p, &r) : f == 1 ? srv_rec(d, n, end, p, &r)
                      : que_rec(d, end, p, &r);
            if (!found) continue;
            if (k >= cap) return -1;
            out[k] = (out_t){r.kind, p, r.a, r.b, r.c, r.e, r.kind <= K_RUNS ? stamp(d, p) : -1.0};
            if (f == 1 && has(d, end, p + 5, LIT("  load_model: loading model"))) stats[0]++;
            k++;
            from[f] = r.end;
        }
    }
    return k;
}

static int find(const uint8_t *d, int64_t from, int64_t to, const char *s, int64_t len) {
    for (int64_t q = from; q + len <= to; q++) {
        const uint8_t *hit = memchr(d + q, s[0], (size_t)(to - q));
        if (!hit) return 0;
        q = hit - d;
        if (q + len <= to && memcmp(hit, s, (size_t)len) == 0) return 1;
    }
    return 0;
}

/* The start-up lines' gates ("build", "llama_"), as LlamaLogReader._sec_matches finds them with
 * bytes.find: per gate, the first occurrence on each line, its line's start and end (-1: no line
 * end before `end`, and the gate's search stops there); a "llama_" line only when it holds
 * "llama_context" or "llama_init_from_model". Writes gate 0's lines then gate 1's
 * (counts in ng[0], ng[1]); returns -1 when cap is too small. */
int64_t llamagates(const uint8_t *d, int64_t end, int64_t cap, int64_t *ls, int64_t *le, int64_t *ng) {
    static const char *const gates[2] = {"build", "llama_"};
    static const int64_t glen[2] = {5, 6};
    int64_t from[2] = {0, 0}, cnt[2] = {0, 0};
    int done[2] = {0, 0};
    int64_t *out_s[2] = {ls, ls + cap / 2}, *out_e[2] = {le, le + cap / 2};
    for (int64_t i = 0; i + 5 <= end && !(done[0] && done[1]);) {
        uint32_t mask;
        int64_t base = i;
#ifdef __SSE2__
        if (i + 21 <= end) {
            __m128i a = _mm_loadu_si128((const __m128i *)(d + i));
            __m128i b4 = _mm_loadu_si128((const __m128i *)(d + i + 4));
            __m128i b5 = _mm_loadu_si128((const __m128i *)(d + i + 5));
            __m128i hb = _mm_and_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8('b')), _mm_cmpeq_epi8(b4, _mm_set1_epi8('d')));
            __m128i hl = _mm_and_si128(_mm_cmpeq_epi8(a, _mm_set1_epi8('l')), _mm_cmpeq_epi8(b5, _mm_set1_epi8('_')));
            mask = (uint32_t)_mm_movemask_epi8(_mm_or_si128(hb, hl));
            i += 16;
        } else
#endif
        {
            mask = (d[i] == 'b' && d[i + 4] == 'd') || (d[i] == 'l' && i + 5 < end && d[i + 5] == '_');
            i += 1;
        }
        for (; mask; mask &= mask - 1) {
            int64_t p = base + __builtin_ctz(mask);
            int g = d[p] == 'b' ? 0 : 1;
            if (done[g] || p < from[g] || !has(d, end, p, gates[g], glen[g])) continue;
            if (cnt[g] >= cap / 2) return -1;
            int64_t s = p;
            while (s > 0 && d[s - 1] != '\n') s--;
            const uint8_t *nl = memchr(d + p, '\n', (size_t)(end - p));
            int64_t e = nl ? nl - d : end;
            /* a "llama_" line matters only with one of _SEC_LLAMA's words (the reader's own test) */
            if (g == 0 || find(d, s, e, LIT("llama_context")) || find(d, s, e, LIT("llama_init_from_model"))) {
                out_s[g][cnt[g]] = s;
                out_e[g][cnt[g]] = nl ? nl - d : -1;
                cnt[g]++;
            }
            if (nl) from[g] = nl - d;
            else done[g] = 1;
        }
    }
    ng[0] = cnt[0];
    ng[1] = cnt[1];
    return cnt[0] + cnt[1];
}

/* ------------------------------------------------------------------ prefixes of collectors
 * llamastrip: prefixes.strip_block (the reference, and where the prefixes are described) in C.
 * It takes the recognised prefixes off every line of d[0:end] (d[0] is a line end, d[0:end] ends
 * with one) in place and returns the end of the text left; st is the state both update:
 * mode, has_origin, origin_us, origin_style, styles, stripped. Lines without a prefix cost one
 * memchr and a look at their first byte. */
enum { UNDECIDED = 0, SERVER_CLOCK = 1, PREFIX_CLOCK = 2 };
enum { S_RFC3339 = 1, S_JOURNALD = 2, S_PID = 4, S_SPACE = 8 };
#define DAY_US 86400000000LL

static int two(const uint8_t *d, int64_t p, int64_t le, int *v) {
    if (p + 2 > le || !digit(d[p]) || !digit(d[p + 1])) return 0;
    *v = (d[p] - '0') * 10 + (d[p + 1] - '0');
    return 1;
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t dd) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + dd - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

/* ".f{1,maxd}" (optional): the fraction as microseconds; returns the position after it, -1 when
   the dot has no digits or more than maxd */
static int64_t fraction(const uint8_t *d, int64_t p, int64_t le, int maxd, int64_t *us) {
    *us = 0;
    if (p >= le || d[p] != '.') return p;
    int64_t q = p + 1, n = 0, v = 0;
    while (q < le && digit(d[q])) { if (n < 6) v = v * 10 + (d[q] - '0'); n++; q++; }
    if (n == 0 || n > maxd) return -1;
    for (int64_t k = n; k < 6; k++) v *= 10;
    *us = v;
    return q;
}

/* an RFC 3339 time and its space at p: the position after it (0: none, -1: out of range) */
static int64_t rfc3339(const uint8_t *d, int64_t p, int64_t le, int64_t *t_us) {
    int y1, y2, mo, dd, h, mi, s, zh = 0, zm = 0, sign = 0;
    if (!two(d, p, le, &y1) || !two(d, p + 2, le, &y2) || p + 19 > le || d[p + 4] != '-'
        || !two(d, p + 5, le, &mo) || d[p + 7] != '-' || !two(d, p + 8, le, &dd) || d[p + 10] != 'T'
        || !two(d, p + 11, le, &h) || d[p + 13] != ':' || !two(d, p + 14, le, &mi) || d[p + 16] != ':'
        || !two(d, p + 17, le, &s)) return 0;
    int64_t frac, q = fraction(d, p + 19, le, 9, &frac);
    if (q < 0 || q >= le) return 0;
    if (d[q] == 'Z') q++;
    else if (d[q] == '+' || d[q] == '-') {
        sign = d[q] == '+' ? 1 : -1;
        if (!two(d, q + 1, le, &zh) || q + 3 >= le || d[q + 3] != ':' || !two(d, q + 4, le, &zm)) return 0;
        q += 6;
    } else return 0;
    if (q >= le || d[q] != ' ') return 0;
    if (mo < 1 || mo > 12 || dd < 1 || dd > 31 || h > 23 || mi > 59 || s > 60 || zh > 23 || zm > 59) return -1;
    int64_t off = (int64_t)(zh * 3600 + zm * 60) * sign;
    *t_us = (days_from_civil(y1 * 100 + y2, mo, dd) * 86400 + h * 3600 + mi * 60 + s - off) * 1000000 + frac;
    return q + 1;
}

static const int CUM_DAYS[12] = {0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334};

/* journald's `Mon DD HH:MM:SS[.ffffff] host ident[pid]: ` at p (0: none, -1: out of range) */
static int64_t journald(const uint8_t *d, int64_t p, int64_t le, int64_t *t_us) {
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    if (p + 16 > le) return 0;
    int mon = -1;
    for (int i = 0; i < 12; i++)
        if (memcmp(d + p, months + 3 * i, 3) == 0) { mon = i; break; }
    int d2, h, mi, s;
    if (mon < 0 || d[p + 3] != ' ' || !(d[p + 4] == ' ' || digit(d[p + 4])) || !digit(d[p + 5]) || d[p + 6] != ' '
        || !two(d, p + 7, le, &h) || d[p + 9] != ':' || !two(d, p + 10, le, &mi) || d[p + 12] != ':'
        || !two(d, p + 13, le, &s)) return 0;
    d2 = (d[p + 4] == ' ' ? 0 : d[p + 4] - '0') * 10 + (d[p + 5] - '0');
    int64_t frac, q = fraction(d, p + 15, le, 6, &frac);
    if (q < 0 || q >= le || d[q] != ' ') return 0;
    int64_t a = ++q;   /* host: 1-64 bytes, no space */
    while (q < le && d[q] != ' ') q++;
    if (q == a || q - a > 64 || q >= le) return 0;
    a = ++q;           /* identifier: 1-64 bytes, none of " [:" */
    while (q < le && d[q] != ' ' && d[q] != '[' && d[q] != ':') q++;
    if (q == a || q - a > 64 || q >= le) return 0;
    if (d[q] == '[') {
        int64_t b = ++q;
        while (q < le && digit(d[q])) q++;
        if (q == b || q - b > 10 || q >= le || d[q] != ']') return 0;
        q++;
    }
    if (q + 2 > le || d[q] != ':' || d[q + 1] != ' ') return 0;
    if (d2 < 1 || d2 > 31 || h > 23 || mi > 59 || s > 60) return -1;
    *t_us = ((int64_t)(CUM_DAYS[mon] + d2 - 1) * 86400 + h * 3600 + mi * 60 + s) * 1000000 + frac;
    return q + 2;
}

/* the server's own `M.SS.mmm.uuu L ` (minutes: 1-6 digits) at p */
static int server_ts(const uint8_t *d, int64_t p, int64_t le) {
    int64_t q = p;
    while (q < le && digit(d[q]) && q - p < 7) q++;
    if (q == p || q - p > 6 || q + 14 > le) return 0;
    const uint8_t *g = d + q;
    return g[0] == '.' && digit(g[1]) && digit(g[2]) && g[3] == '.' && digit(g[4]) && digit(g[5]) && digit(g[6])
        && g[7] == '.' && digit(g[8]) && digit(g[9]) && digit(g[10]) && g[11] == ' ' && g[12] >= 'A' && g[12] <= 'Z'
        && g[13] == ' ';
}

static int family_at(const uint8_t *d, int64_t p, int64_t le) {
    return has(d, le, p, LIT("slot ")) || has(d, le, p, LIT("srv  ")) || has(d, le, p, LIT("que  "));
}

/* Could the line at ls carry a prefix? (A superset of what the parsers below take, tested with
   a byte or two: lines of a log without prefixes are passed over at the speed of the newline scan.) */
static int maybe_prefixed(const uint8_t *d, int64_t ls, int64_t end) {
    uint8_t c = d[ls];
    if (digit(c)) return ls + 4 < end && d[ls + 4] == '-';
    if (c >= 'A' && c <= 'Z') return ls + 3 < end && d[ls + 3] == ' ';
    if (c == '[') return ls + 1 < end && digit(d[ls + 1]);
    if (c == ' ') return ls + 1 < end && (d[ls + 1] == 's' || d[ls + 1] == 'q' || digit(d[ls + 1]));
    return 0;
}

/* the first line start at or after the line start p that may carry a prefix (end: none) */
static int64_t next_candidate(const uint8_t *d, int64_t p, int64_t end) {
    if (p >= end || maybe_prefixed(d, p, end)) return p;
    int64_t i = p;
#ifdef __SSE2__
    const __m128i nl = _mm_set1_epi8('\n');
    for (; i + 16 <= end; i += 16) {
        uint32_t m = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(d + i)), nl));
        for (; m; m &= m - 1) {
            int64_t q = i + __builtin_ctz(m) + 1;
            if (q < end && maybe_prefixed(d, q, end)) return q;
        }
    }
#endif
    for (; i < end; i++)
        if (d[i] == '\n' && i + 1 < end && maybe_prefixed(d, i + 1, end)) return i + 1;
    return end;
}

int64_t llamastrip(uint8_t *d, int64_t end, int64_t *st) {
    int64_t mode = st[0], has_origin = st[1], origin = st[2], ostyle = st[3], styles = st[4], stripped = st[5];
    int64_t w = 1, ls = 1;   /* write position; the line being read starts at ls */
    while (ls < end) {
        int64_t c0 = next_candidate(d, ls, end);   /* the lines before it: as they are, in one move */
        if (c0 > ls) {
            if (w != ls) memmove(d + w, d + ls, (size_t)(c0 - ls));
            w += c0 - ls;
            ls = c0;
            if (ls >= end) break;
        }
        const uint8_t *nl = memchr(d + ls, '\n', (size_t)(end - ls));
        int64_t le = nl ? nl - d : end;   /* the line's end (its '\n') */
        int64_t next = nl ? le + 1 : end;
        uint8_t c = d[ls];
        int64_t pe = ls, t_us = 0;
        int outer = 0, flags = 0, bad = 0;
        if (digit(c) || (c >= 'A' && c <= 'Z') || c == '[' || c == ' ') {
            int64_t q;
            if (digit(c) && (q = rfc3339(d, ls, le, &t_us)) != 0) {
                if (q < 0) bad = 1; else { outer = S_RFC3339; pe = q; }
            } else if (c >= 'A' && c <= 'Z' && (q = journald(d, ls, le, &t_us)) != 0) {
                if (q < 0) bad = 1;
                else {
                    outer = S_JOURNALD; pe = q;
                    if (has_origin && ostyle == S_JOURNALD && t_us < origin - 182 * DAY_US) t_us += 365 * DAY_US;
                }
            }
            if (!bad && pe < le && d[pe] == '[') {   /* [pid] */
                int64_t b = pe + 1;
                q = b;
                while (q < le && digit(d[q]) && q - b <= 10) q++;
                if (q > b && q - b <= 10 && q + 1 < le && d[q] == ']' && d[q + 1] == ' ') { flags |= S_PID; pe = q + 2; }
            }
            if (!bad && pe < le && d[pe] == ' ' && (family_at(d, pe + 1, le) || server_ts(d, pe + 1, le))) {
                flags |= S_SPACE;
                pe++;
            }
        }
        if (bad || pe == ls) {   /* no prefix: the line as it is */
            if (w != ls) memmove(d + w, d + ls, (size_t)(next - ls));
            w += next - ls;
            ls = next;
            continue;
        }
        styles |= outer | flags;
        stripped++;
        if (outer && !has_origin) { has_origin = 1; origin = t_us; ostyle = outer; }
        char synth[32];
        int slen = 0;
        if (family_at(d, pe, le)) {
            if (outer && mode == UNDECIDED) mode = PREFIX_CLOCK;
            int64_t rel = t_us - origin;
            if (mode == PREFIX_CLOCK && outer == ostyle && rel >= 0 && rel / 60000000 <= 999999) {
                int64_t minutes = rel / 60000000, r = rel % 60000000;
                char digs[8];
                int nd = 0;
                do { digs[nd++] = (char)('0' + minutes % 10); minutes /= 10; } while (minutes);
                while (nd) synth[slen++] = digs[--nd];
                int64_t sec = r / 1000000, ms = r / 1000 % 1000, us = r % 1000;
                synth[slen++] = '.';
                synth[slen++] = (char)('0' + sec / 10); synth[slen++] = (char)('0' + sec % 10);
                synth[slen++] = '.';
                synth[slen++] = (char)('0' + ms / 100); synth[slen++] = (char)('0' + ms / 10 % 10);
                synth[slen++] = (char)('0' + ms % 10);
                synth[slen++] = '.';
                synth[slen++] = (char)('0' + us / 100); synth[slen++] = (char)('0' + us / 10 % 10);
                synth[slen++] = (char)('0' + us % 10);
                synth[slen++] = ' '; synth[slen++] = 'I'; synth[slen++] = ' ';
            }
        } else if (outer && mode == UNDECIDED && server_ts(d, pe, le)) {
            mode = SERVER_CLOCK;
        }
        /* the synthesized prefix is never longer than the time it replaces (>= 21 bytes) */
        memcpy(d + w, synth, (size_t)slen);
        w += slen;
        memmove(d + w, d + pe, (size_t)(next - pe));
        w += next - pe;
        ls = next;
    }
    st[0] = mode; st[1] = has_origin; st[2] = origin; st[3] = ostyle; st[4] = styles; st[5] = stripped;
    return w;
}
