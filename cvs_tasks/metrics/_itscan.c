/* Native scanner for Megatron-LM / Primus iteration lines: the parser's hot loop in C.
 *
 * scan(block, stride[, repeat_of]) reads a window of whole lines (bytes, or an ASCII str) and returns every
 * iteration line it *accepts* as typed columns, plus the text of every other line. It accepts a
 * line only when it is certain that ``iteration.ITERATION_RE`` matches that line and that the
 * Python column code (``columns.typed_columns``) would produce exactly the values it computed;
 * anything unusual (a nan/inf or oddly spelled number, an unknown segment order, non-ASCII in
 * the body, a month out of range) is left as "other" text. A window whose other text still
 * looks like an iteration line is flagged ``suspicious`` and the caller parses it in Python, so
 * the result is always the pure-Python result. See ``cvs_tasks/metrics/native.py``.
 *
 * Numbers: Clinger's exact fast path (mantissa <= 2^53, |exponent| <= 22, one correctly
 * rounded IEEE operation), else PyOS_string_to_double, which is what float() itself uses.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* Column order of iteration.COLUMNS; the Python side checks NCOL. */
enum { C_STEP, C_TOTAL, C_MS, C_MS_AVG, C_TF, C_TF_AVG, C_TOK, C_TOK_AVG, C_LR, C_GBS, C_LOSS,
       C_GN, C_SKIP, C_NAN, C_MEM, C_TS, NCOL };

/* Dialect evidence bits, in native.FEATURES order. */
enum { F_PAIRS = 1, F_TOK_HARMONIC = 2, F_TOK_PER_GPU = 4, F_TF_AVG_FORM = 8, F_TF_COMPUTE = 16,
       F_HIP = 32, F_MEM_USAGES = 64, F_TS_US = 128, F_TS_S = 256, F_NO_TS = 512,
       F_RANK_PREFIX = 1024 };

typedef struct {
    long long step;
    double v[NCOL];
    int loss_printed;
    int counters_nonzero; /* skipped or nan counter printed as anything but "0" */
    unsigned features;
} Row;

typedef struct {
    const char *p, *e; /* cursor and line end (the '\n') */
} Cur;

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                                 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int is_digit(char c) { return c >= '0' && c <= '9'; }
static int is_num_char(char c) { /* [\w.+-] on ASCII */
    return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '.' ||
           c == '+' || c == '-';
}

static int lit_n(Cur *c, const char *s, size_t n) {
    if ((size_t)(c->e - c->p) < n || memcmp(c->p, s, n) != 0) return 0;
    c->p += n;
    return 1;
}
static int peek_n(const Cur *c, const char *s, size_t n) {
    return (size_t)(c->e - c->p) >= n && memcmp(c->p, s, n) == 0;
}
#define LIT(c, s) lit_n((c), (s), sizeof(s) - 1)
#define PEEK(c, s) peek_n((c), (s), sizeof(s) - 1)

static int spaces1(Cur *c) { /* ' +' */
    if (c->p >= c->e || *c->p != ' ') return 0;
    while (c->p < c->e && *c->p == ' ') c->p++;
    return 1;
}
static void spaces0(Cur *c) {
    while (c->p < c->e && *c->p == ' ') c->p++;
}
static int bar(Cur *c) { /* ' +\|' */
    return spaces1(c) && LIT(c, "|");
}
static int skip_to_bar(Cur *c) { /* '[^|\n]*\|' */
    const char *q = memchr(c->p, '|', (size_t)(c->e - c->p));
    if (q == NULL) return 0;
    c->p = q + 1;
    return 1;
}

/* '\d+' as a double and, when it fits, an integer; *text_is_zero tells whether it read "0". */
static int digits(Cur *c, double *value, long long *as_int, int *text_is_zero) {
    const char *s = c->p;
    while (c->p < c->e && is_digit(*c->p)) c->p++;
    size_t n = (size_t)(c->p - s);
    if (n == 0) return 0;
    if (text_is_zero) *text_is_zero = (n == 1 && s[0] == '0');
    if (n > 18) return 0; /* an absurd count: leave it to Python */
    long long x = 0;
    for (size_t i = 0; i < n; i++) x = x * 10 + (s[i] - '0');
    if (value && x > (1LL << 53)) return 0; /* as a double it would not be exact */
    if (as_int) *as_int = x;
    if (value) *value = (double)x;
    return 1;
}

/* A strict decimal [+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)? -> the double float() gives, or 0. */
static int decimal(const char *s, size_t n, double *out) {
    size_t i = 0;
    int neg = 0;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = (s[i++] == '-');
    uint64_t mant = 0;
    int ndigits = 0, frac = 0, any = 0, big = 0;
    while (i < n && is_digit(s[i])) {
        any = 1;
        if (mant || s[i] != '0') ndigits++;
        if (ndigits > 19) big = 1; else mant = mant * 10 + (uint64_t)(s[i] - '0');
        i++;
    }
    if (i < n && s[i] == '.') {
        i++;
        while (i < n && is_digit(s[i])) {
            any = 1;
            if (mant || s[i] != '0') ndigits++;
            if (ndigits > 19) big = 1; else { mant = mant * 10 + (uint64_t)(s[i] - '0'); frac++; }
            i++;
        }
    }
    if (!any) return 0;
    long exp10 = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int eneg = 0;
        if (i < n && (s[i] == '+' || s[i] == '-')) eneg = (s[i++] == '-');
        if (i >= n || !is_digit(s[i])) return 0;
        while (i < n && is_digit(s[i])) {
            if (exp10 < 100000) exp10 = exp10 * 10 + (s[i] - '0');
            i++;
        }
        if (eneg) exp10 = -exp10;
    }
    if (i != n) return 0;
    long e = exp10 - frac;
    if (!big && mant <= (1ULL << 53) && e >= -22 && e <= 22) {
        double v = (double)mant;
        v = e >= 0 ? v * POW10[e] : v / POW10[-e];
        *out = neg ? -v : v;
        return 1;
    }
    char buf[128];
    if (n >= sizeof(buf)) return 0;
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end = NULL;
    double v = PyOS_string_to_double(buf, &end, NULL);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    if (end != buf + n) return 0;
    *out = v;
    return 1;
}

/* NUM = [\w.+-]+ read as a strict decimal. */
static int number(Cur *c, double *out) {
    const char *s = c->p;
    while (c->p < c->e && is_num_char(*c->p)) c->p++;
    if (c->p == s) return 0;
    return decimal(s, (size_t)(c->p - s), out);
}

/* 'hip mem usage/free/total/usage_ratio: [^|\n]*?/NUM%' after the label: the usage ratio in %. */
static int hip_ratio(Cur *c, double *out) {
    const char *pct = c->p;
    while (pct < c->e && *pct != '%' && *pct != '|') pct++;
    if (pct >= c->e || *pct != '%') return 0;
    const char *slash = pct;
    while (slash > c->p && slash[-1] != '/') slash--;
    if (slash == c->p || slash == pct) return 0; /* no '/' before the number, or no number */
    for (const char *q = slash; q < pct; q++)
        if (!is_num_char(*q)) return 0;
    double v;
    if (!decimal(slash, (size_t)(pct - slash), &v)) return 0;
    *out = v / 100.0;
    c->p = pct + 1;
    return 1;
}

/* '(?:rocm|rank-\d+(?: rocm)? max) mem usage' at the cursor (advances only on success). */
static int mem_tail_label(Cur *c) {
    Cur t = *c;
    if (LIT(&t, "rocm mem usage")) { *c = t; return 1; }
    if (!LIT(&t, "rank-")) return 0;
    const char *s = t.p;
    while (t.p < t.e && is_digit(*t.p)) t.p++;
    if (t.p == s) return 0;
    if (LIT(&t, " rocm max mem usage") || LIT(&t, " max mem usage")) { *c = t; return 1; }
    return 0;
}

static long long days_from_civil(long long y, int m, int d) { /* proleptic Gregorian, 1970-01-01 = 0 */
    y -= m <= 2;
    long long era = (y >= 0 ? y : y - 399) / 400;
    long long yoe = y - era * 400;
    long long doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    long long doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int two(const char *s) { return (s[0] - '0') * 10 + (s[1] - '0'); }

/* '[YYYY-MM-DD[ T]HH:MM:SS(.f+)?]' ending at close (the ']'): start of '[' and the unix seconds. */
static const char *timestamp_before(const char *line, const char *close, double *out, int *micro) {
    const char *q = close;
    while (q > line && is_digit(q[-1])) q--;
    const char *base_end = close;
    *micro = 0;
    if (q > line && q[-1] == '.' && q < close) { base_end = q - 1; *micro = 1; }
    if (base_end - line < 20) return NULL;
    const char *b = base_end - 19;
    if (b[-1] != '[') return NULL;
    static const char shape[] = "dddd-dd-dd?dd:dd:dd";
    for (int i = 0; i < 19; i++) {
        char want = shape[i], got = b[i];
        if (want == 'd' ? !is_digit(got) : want == '?' ? (got != ' ' && got != 'T') : got != want)
            return NULL;
    }
    int year = two(b) * 100 + two(b + 2), month = two(b + 5), day = two(b + 8);
    if (year < 1 || month < 1 || month > 12) return NULL; /* Python reads NaN: let it */
    long long secs = (days_from_civil(year, month, 1) + day - 1) * 86400LL + two(b + 11) * 3600LL +
                     two(b + 14) * 60LL;
    double frac;
    if (!decimal(b + 17, (size_t)(close - (b + 17)), &frac)) return NULL;
    *out = (double)secs + frac;
    return b - 1;
}

static const char *find_n(const char *s, const char *e, const char *needle, size_t n) {
    while ((size_t)(e - s) >= n) {
        const char *q = memchr(s, needle[0], (size_t)(e - s) - n + 1);
        if (q == NULL) return NULL;
        if (memcmp(q, needle, n) == 0) return q;
        s = q + 1;
    }
    return NULL;
}

/* Head: the first "iteration N/T | consumed samples: C |" of the line (blanks as the regex allows). */
static const char *find_head(const char *line, const char *end, Row *r, Cur *body) {
    const char *from = line;
    for (;;) {
        const char *q = find_n(from, end, "iteration", 9);
        if (q == NULL) return NULL;
        Cur c = {q + 9, end};
        double total, consumed;
        long long step;
        if (spaces1(&c) && digits(&c, NULL, &step, NULL) && (spaces0(&c), LIT(&c, "/")) &&
            (spaces0(&c), digits(&c, &total, NULL, NULL)) && bar(&c) &&
            LIT(&c, " consumed samples:") && spaces1(&c) && digits(&c, &consumed, NULL, NULL) &&
            bar(&c)) {
            r->step = step;
            r->v[C_STEP] = (double)step;
            r->v[C_TOTAL] = total;
            *body = c;
            return q;
        }
        from = q + 1;
    }
}

/* One line [line, end) (end at its '\n'): 1 and the row when accepted, else 0. */
static int parse_line(const char *line, const char *end, Row *r) {
    for (int i = 0; i < NCOL; i++) r->v[i] = Py_NAN;
    r->loss_printed = 0;
    r->counters_nonzero = 0;
    r->features = 0;
    Cur c;
    const char *it = find_head(line, end, r, &c);
    if (it == NULL) return 0;

    /* where the regex's lazy prefix stops: at '[' of an adjacent stamp, else before ' ?iteration' */
    const char *start = it, *sp = it;
    while (sp > line && sp[-1] == ' ' && it - sp < 3) sp--;
    int stamped = 0, micro = 0;
    if (it - sp <= 2 && sp > line && sp[-1] == ']') {
        const char *open = timestamp_before(line, sp - 1, &r->v[C_TS], &micro);
        if (open != NULL) { start = open; stamped = 1; }
    }
    if (!stamped) {
        /* a stamp-like bracket that the regex would read (stamp then <= 2 blanks) but we cannot */
        if (it - sp <= 2 && sp > line && sp[-1] == ']' && sp - line >= 21 && is_digit(sp[-2])) return 0;
        if (it > line && it[-1] == ' ') start = it - 1;
    }
    r->features |= stamped ? (micro ? F_TS_US : F_TS_S) : F_NO_TS;
    if (find_n(line, start, "rank-", 5) != NULL) r->features |= F_RANK_PREFIX;

    if (PEEK(&c, " skipped samples:")) {
        if (!(LIT(&c, " skipped samples:") && spaces1(&c) && digits(&c, NULL, NULL, NULL) && bar(&c))) return 0;
    }
    if (!LIT(&c, " elapsed time per iteration (ms): ") || !number(&c, &r->v[C_MS])) return 0;
    if (LIT(&c, "/")) {
        if (!number(&c, &r->v[C_MS_AVG])) return 0;
        r->features |= F_PAIRS;
    }
    if (!bar(&c)) return 0;

    /* memory: mem usages before hip ratios, the segment before the counters before the one after */
    double mem1 = Py_NAN, mem2 = Py_NAN, hip1 = Py_NAN, hip2 = Py_NAN;
    int mem_segment = 0;
    if (LIT(&c, " mem usages: ")) {
        if (!number(&c, &mem1)) return 0;
        r->features |= F_MEM_USAGES;
        mem_segment = 1;
    } else if (LIT(&c, " hip mem usage/free/total/usage_ratio: ")) {
        if (!hip_ratio(&c, &hip1)) return 0;
        r->features |= F_HIP;
        mem_segment = 1;
    }
    if (mem_segment) {
        spaces0(&c);
        if (!LIT(&c, "|")) return 0;
        for (;;) { /* rocm / rank-N max memory segments */
            Cur t = c;
            spaces0(&t);
            if (!mem_tail_label(&t)) break;
            if (!skip_to_bar(&t)) return 0;
            c = t;
        }
    }

    int compute = PEEK(&c, " compute per GPU (TFLOP/s/GPU): ");
    if (compute || PEEK(&c, " throughput per GPU (TFLOP/s/GPU): ")) {
        if (compute) { LIT(&c, " compute per GPU (TFLOP/s/GPU): "); r->features |= F_TF_COMPUTE; }
        else LIT(&c, " throughput per GPU (TFLOP/s/GPU): ");
        if (!number(&c, &r->v[C_TF])) return 0;
        if (LIT(&c, "/")) {
            if (!number(&c, &r->v[C_TF_AVG])) return 0;
        } else if (LIT(&c, " (avg ")) {
            if (!number(&c, &r->v[C_TF_AVG]) || !LIT(&c, ")")) return 0;
            r->features |= F_TF_AVG_FORM;
        }
        if (!bar(&c)) return 0;
    }

    int harmonic = PEEK(&c, " tokens/s/GPU inst/harmonic mean: ");
    if (harmonic || PEEK(&c, " tokens per GPU (tokens/s/GPU): ")) {
        if (harmonic) { LIT(&c, " tokens/s/GPU inst/harmonic mean: "); r->features |= F_TOK_HARMONIC; }
        else { LIT(&c, " tokens per GPU (tokens/s/GPU): "); r->features |= F_TOK_PER_GPU; }
        if (!number(&c, &r->v[C_TOK])) return 0;
        if (LIT(&c, "/") && !number(&c, &r->v[C_TOK_AVG])) return 0;
        if (!bar(&c)) return 0;
        if (PEEK(&c, " seq_length:")) {
            if (!(LIT(&c, " seq_length:") && spaces1(&c) && digits(&c, NULL, NULL, NULL) && bar(&c))) return 0;
        }
    }
    if (PEEK(&c, " energy per GPU (J/iter/GPU): ")) {
        if (!(LIT(&c, " energy per GPU (J/iter/GPU): ") && skip_to_bar(&c) &&
              LIT(&c, " power per GPU (W/GPU): ") && skip_to_bar(&c))) return 0;
    }
    if (LIT(&c, " learning rate: ")) {
        if (!number(&c, &r->v[C_LR]) || !bar(&c)) return 0;
    }
    if (LIT(&c, " decoupled learning rate: ") && !skip_to_bar(&c)) return 0;
    if (!(LIT(&c, " global batch size:") && spaces1(&c) && digits(&c, &r->v[C_GBS], NULL, NULL) &&
          bar(&c))) return 0;
    if (LIT(&c, " lm loss: ")) {
        if (!number(&c, &r->v[C_LOSS]) || !bar(&c)) return 0;
        r->loss_printed = 1;
    }
    while (!PEEK(&c, " loss scale:")) { /* other losses (MoE, MTP): any ' text |' segment */
        if (!LIT(&c, " ") || !skip_to_bar(&c)) return 0;
    }
    if (!(LIT(&c, " loss scale: ") && skip_to_bar(&c))) return 0;
    if (LIT(&c, " grad norm: ")) {
        if (!number(&c, &r->v[C_GN]) || !bar(&c)) return 0;
    }
    if (LIT(&c, " num zeros: ") && !skip_to_bar(&c)) return 0;
    if (LIT(&c, " params norm: ") && !skip_to_bar(&c)) return 0;
    int zero;
    if (!(LIT(&c, " number of skipped iterations:") && spaces1(&c) &&
          digits(&c, &r->v[C_SKIP], NULL, &zero) && bar(&c))) return 0;
    r->counters_nonzero |= !zero;
    if (!(LIT(&c, " number of nan iterations:") && spaces1(&c) &&
          digits(&c, &r->v[C_NAN], NULL, &zero))) return 0;
    r->counters_nonzero |= !zero;

    { /* a memory segment after the counters (newer Primus) */
        Cur t = c;
        if (bar(&t) && LIT(&t, " ")) {
            if (LIT(&t, "mem usages: ")) {
                if (!number(&t, &mem2)) return 0;
                r->features |= F_MEM_USAGES;
                c = t;
            } else if (LIT(&t, "hip mem usage/free/total/usage_ratio: ")) {
                if (!hip_ratio(&t, &hip2)) return 0;
                r->features |= F_HIP;
                c = t;
            }
        }
    }
    for (;;) { /* ' +\| *(rocm|rank-N max) mem usage[^|\n]*' segments */
        Cur t = c;
        if (!bar(&t)) break;
        spaces0(&t);
        if (!mem_tail_label(&t)) break;
        const char *q = memchr(t.p, '|', (size_t)(t.e - t.p));
        t.p = q ? q : t.e;
        while (t.p > c.p && t.p[-1] == ' ') t.p--;
        c = t;
    }
    r->v[C_MEM] = mem1 == mem1 ? mem1 : mem2 == mem2 ? mem2 : hip1 == hip1 ? hip1 : hip2;
    spaces0(&c); /* ' *\|?[ \t\r]*\n' */
    LIT(&c, "|");
    while (c.p < c.e && (*c.p == ' ' || *c.p == '\t' || *c.p == '\r')) c.p++;
    return c.p == c.e;
}

/* Does a line (ANSI colours removed, ASCII lower-cased) hold "elapsed time per iteration"? */
static int looks_like_iteration(const char *s, const char *e, char **buf, size_t *cap) {
    size_t n = (size_t)(e - s);
    if (n < 26) return 0;
    if (n > *cap) {
        char *grown = PyMem_Realloc(*buf, n);
        if (grown == NULL) return 1; /* cannot tell: let Python read the window */
        *buf = grown;
        *cap = n;
    }
    size_t k = 0;
    for (const char *p = s; p < e; p++) {
        if (*p == '\x1b' && p + 1 < e && p[1] == '[') {
            const char *q = p + 2;
            while (q < e && (is_digit(*q) || *q == ';' || *q == '?')) q++;
            if (q < e && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z'))) { p = q; continue; }
        }
        char ch = *p;
        (*buf)[k++] = (ch >= 'A' && ch <= 'Z') ? (char)(ch + 32) : ch;
    }
    return find_n(*buf, *buf + k, "elapsed time per iteration", 26) != NULL;
}

typedef struct {
    Row *rows;
    Py_ssize_t n, cap;
} Rows;

static int rows_push(Rows *rs, const Row *r) {
    if (rs->n == rs->cap) {
        Py_ssize_t cap = rs->cap ? rs->cap * 2 : 1024;
        Row *grown = PyMem_Realloc(rs->rows, (size_t)cap * sizeof(Row));
        if (grown == NULL) return 0;
        rs->rows = grown;
        rs->cap = cap;
    }
    rs->rows[rs->n++] = *r;
    return 1;
}

/* Steps (int64) and the columns 1..NCOL-1 (float64, column after column) of the selected rows. */
static PyObject *pack(const Rows *rs, const unsigned char *keep, int want, Py_ssize_t count) {
    PyObject *steps = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(long long));
    PyObject *cols = PyBytes_FromStringAndSize(NULL, count * (NCOL - 1) * (Py_ssize_t)sizeof(double));
    if (steps == NULL || cols == NULL) {
        Py_XDECREF(steps);
        Py_XDECREF(cols);
        return NULL;
    }
    long long *st = (long long *)PyBytes_AS_STRING(steps);
    double *cv = (double *)PyBytes_AS_STRING(cols);
    Py_ssize_t k = 0;
    for (Py_ssize_t i = 0; i < rs->n; i++) {
        if (keep[i] != want) continue;
        st[k] = rs->rows[i].step;
        for (int j = 1; j < NCOL; j++) cv[(j - 1) * count + k] = rs->rows[i].v[j];
        k++;
    }
    return Py_BuildValue("(NN)", steps, cols);
}

static PyObject *piece(int is_str, const char *base, Py_ssize_t a, Py_ssize_t b) {
    if (is_str) return PyUnicode_FromStringAndSize(base + a, b - a); /* ASCII: valid UTF-8 */
    return PyBytes_FromStringAndSize(base + a, b - a);
}

static PyObject *scan(PyObject *self, PyObject *args) {
    PyObject *block;
    long long stride, repeat_of = -1;
    if (!PyArg_ParseTuple(args, "OL|L", &block, &stride, &repeat_of)) return NULL;
    if (stride < 1) {
        PyErr_SetString(PyExc_ValueError, "stride must be >= 1");
        return NULL;
    }
    const char *base;
    Py_ssize_t size;
    int is_str = PyUnicode_Check(block);
    if (is_str) {
        if (!PyUnicode_IS_ASCII(block)) Py_RETURN_NONE;
        base = (const char *)PyUnicode_1BYTE_DATA(block);
        size = PyUnicode_GET_LENGTH(block);
    } else if (PyBytes_Check(block)) {
        base = PyBytes_AS_STRING(block);
        size = PyBytes_GET_SIZE(block);
    } else {
        PyErr_SetString(PyExc_TypeError, "scan() takes bytes or str");
        return NULL;
    }

    Rows rs = {NULL, 0, 0};
    PyObject *pieces = PyList_New(0);
    char *lower = NULL;
    size_t lower_cap = 0;
    unsigned features = 0;
    Py_ssize_t missing_loss = 0, counters_nonzero = 0, other_start = -1;
    int suspicious = 0, increasing = 1, nondecreasing = 1;
    if (pieces == NULL) return NULL;

    Py_ssize_t pos = 0;
    while (pos < size) {
        const char *line = base + pos;
        const char *nl = memchr(line, '\n', (size_t)(size - pos));
        Py_ssize_t next = nl ? (nl - base) + 1 : size;
        const char *end = nl ? nl : base + size;
        Row r;
        if (nl != NULL && parse_line(line, end, &r)) {
            if (other_start >= 0) {
                PyObject *text = piece(is_str, base, other_start, pos);
                PyObject *item = text ? Py_BuildValue("(nN)", rs.n, text) : NULL;
                if (item == NULL || PyList_Append(pieces, item) < 0) { Py_XDECREF(item); goto fail; }
                Py_DECREF(item);
                other_start = -1;
            }
            if (rs.n && r.step <= rs.rows[rs.n - 1].step) increasing = 0;
            if (rs.n && r.step < rs.rows[rs.n - 1].step) nondecreasing = 0;
            features |= r.features;
            missing_loss += !r.loss_printed;
            counters_nonzero += r.counters_nonzero;
            if (!rows_push(&rs, &r)) { PyErr_NoMemory(); goto fail; }
        } else {
            if (other_start < 0) other_start = pos;
            if (!suspicious && looks_like_iteration(line, end, &lower, &lower_cap)) suspicious = 1;
        }
        pos = next;
    }
    if (other_start >= 0) {
        PyObject *text = piece(is_str, base, other_start, size);
        PyObject *item = text ? Py_BuildValue("(nN)", rs.n, text) : NULL;
        if (item == NULL || PyList_Append(pieces, item) < 0) { Py_XDECREF(item); goto fail; }
        Py_DECREF(item);
    }

    PyObject *all_steps = PyBytes_FromStringAndSize(NULL, rs.n * (Py_ssize_t)sizeof(long long));
    if (all_steps == NULL) goto fail;
    long long *st = (long long *)PyBytes_AS_STRING(all_steps);
    for (Py_ssize_t i = 0; i < rs.n; i++) st[i] = rs.rows[i].step;
    Py_ssize_t n_lines = rs.n;
    int repeated = !increasing || (rs.n && rs.rows[0].step == repeat_of);
    if (repeated && nondecreasing) {
        /* a step logged again (Primus forwarding): its last line wins, and, as the Python path
         * stores such a window row by row, nothing of it is thinned */
        Py_ssize_t k = 0;
        for (Py_ssize_t i = 0; i < rs.n; i++)
            if (i + 1 == rs.n || rs.rows[i + 1].step != rs.rows[i].step) rs.rows[k++] = rs.rows[i];
        rs.n = k;
        increasing = 1;
        stride = 1;
    }

    /* retention: keep multiples of the stride and the window's last row */
    unsigned char *keep = PyMem_Malloc(rs.n ? (size_t)rs.n : 1);
    if (keep == NULL) { Py_DECREF(all_steps); PyErr_NoMemory(); goto fail; }
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < rs.n; i++) {
        keep[i] = (rs.rows[i].step % stride == 0) || i == rs.n - 1;
        kept += keep[i];
    }
    PyObject *kept_part = pack(&rs, keep, 1, kept);
    PyObject *dropped_part = pack(&rs, keep, 0, rs.n - kept);
    PyMem_Free(keep);
    if (kept_part == NULL || dropped_part == NULL) {
        Py_DECREF(all_steps);
        Py_XDECREF(kept_part);
        Py_XDECREF(dropped_part);
        goto fail;
    }
    PyObject *result = Py_BuildValue("(nNNNNInnii)", n_lines, all_steps, kept_part, dropped_part,
                                     pieces, features, missing_loss, counters_nonzero, increasing,
                                     suspicious);
    PyMem_Free(rs.rows);
    PyMem_Free(lower);
    return result;

fail:
    Py_DECREF(pieces);
    PyMem_Free(rs.rows);
    PyMem_Free(lower);
    return NULL;
}

/* value_counts(float64 buffer[, into]) -> {value: count} over the finite values, first-seen order:
 * what collections.Counter gives for the same values (0.0 and -0.0 are one key), without a
 * float object per element; with ``into`` (a dict, e.g. a Counter) the counts are added to it
 * and it is returned. The parser folds long logs with it (retention.Folded). */
static PyObject *value_counts(PyObject *self, PyObject *args) {
    PyObject *arg, *into = NULL;
    if (!PyArg_ParseTuple(args, "O|O!", &arg, &PyDict_Type, &into)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_FORMAT | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (view.itemsize != sizeof(double) || view.format == NULL || strcmp(view.format, "d") != 0) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "value_counts() takes a float64 buffer (array('d'))");
        return NULL;
    }
    const double *x = view.buf;
    Py_ssize_t n = view.len / (Py_ssize_t)sizeof(double), distinct = 0;
    size_t cap = 16;
    while (cap < (size_t)n * 2) cap <<= 1;
    Py_ssize_t *slots = PyMem_Malloc(cap * sizeof(Py_ssize_t));
    double *keys = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(double));
    Py_ssize_t *counts = PyMem_Malloc((n ? (size_t)n : 1) * sizeof(Py_ssize_t));
    PyObject *out = NULL;
    if (slots == NULL || keys == NULL || counts == NULL) { PyErr_NoMemory(); goto done; }
    for (size_t i = 0; i < cap; i++) slots[i] = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        double v = x[i];
        if (!(v - v == 0.0)) continue; /* NaN or infinite */
        double key = v == 0.0 ? 0.0 : v;
        uint64_t bits;
        memcpy(&bits, &key, sizeof(bits));
        bits ^= bits >> 33;
        bits *= 0xff51afd7ed558ccdULL;
        bits ^= bits >> 33;
        size_t h = (size_t)bits & (cap - 1);
        while (slots[h] >= 0 && keys[slots[h]] != key) h = (h + 1) & (cap - 1);
        if (slots[h] < 0) {
            slots[h] = distinct;
            keys[distinct] = v; /* the first spelling seen, as Counter keeps it */
            counts[distinct++] = 0;
        }
        counts[slots[h]]++;
    }
    if (into != NULL) Py_INCREF(into);
    out = into != NULL ? into : PyDict_New();
    for (Py_ssize_t i = 0; out != NULL && i < distinct; i++) {
        PyObject *k = PyFloat_FromDouble(keys[i]), *c = NULL;
        if (k != NULL) {
            PyObject *before = into != NULL ? PyDict_GetItemWithError(out, k) : NULL;
            if (before != NULL) {
                PyObject *add = PyLong_FromSsize_t(counts[i]);
                c = add ? PyNumber_Add(before, add) : NULL;
                Py_XDECREF(add);
            } else if (!PyErr_Occurred()) {
                c = PyLong_FromSsize_t(counts[i]);
            }
        }
        if (k == NULL || c == NULL || PyDict_SetItem(out, k, c) < 0) Py_CLEAR(out);
        Py_XDECREF(k);
        Py_XDECREF(c);
    }
done:
    PyMem_Free(slots);
    PyMem_Free(keys);
    PyMem_Free(counts);
    PyBuffer_Release(&view);
    return out;
}

static PyObject *parse_number(PyObject *self, PyObject *arg) {
    /* The strict-decimal reader on its own, for tests: a float, or None when it declines. */
    Py_ssize_t n;
    const char *s = PyUnicode_AsUTF8AndSize(arg, &n);
    if (s == NULL) return NULL;
    double v;
    if (!decimal(s, (size_t)n, &v)) Py_RETURN_NONE;
    return PyFloat_FromDouble(v);
}

static PyMethodDef methods[] = {
    {"scan", scan, METH_VARARGS,
     "scan(block, stride[, repeat_of]) -> window result (see native.py), or None for non-ASCII str."},
    {"value_counts", value_counts, METH_VARARGS,
     "value_counts(array('d')[, into]) -> {value: count} of the finite values (added to into)."},
    {"parse_number", parse_number, METH_O, "parse_number(text) -> float, or None when not a plain decimal."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, .m_name = "_itscan", .m_doc = "Native iteration-line scanner.", .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__itscan(void) {
    PyObject *m = PyModule_Create(&module);
    if (m == NULL) return NULL;
    if (PyModule_AddIntConstant(m, "NCOL", NCOL) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
