/* The hot loop of actors/loadgen/streams.py NativeSink.feed: the token count of every
 * well-formed event of an SGLang native /generate stream in one read, in one call.
 *
 * Why C and not a library or Python: no maintained library scans server-sent events for one
 * JSON key without parsing the event (and SGLang's events carry the cumulative text, so full
 * parsing is O(n^2) per request). In Python the same loop costs ~1.8 us per one-event read on
 * the 2-core reference machine: seven bytes-method calls per event at 100-160 ns each, mostly
 * CPython's argument parsing (bench/native_stream_cost.py). Here it is one call per read.
 *
 * The rule (the same as the pure-Python general path accepts, restricted to the common shape):
 * a line "data: {...}" ending in '}' and followed by a blank line, no CR anywhere in the read,
 * whose last "\"completion_tokens\":" key (a JSON string value cannot hold an unescaped quote,
 * so a match is always a key) is followed by optional whitespace, 1-18 ASCII digits and then
 * ',', '}' or whitespace. The first line that breaks the rule stops the scan: the caller hands
 * the rest of the read to the general path (sse.split_events + NativeSink._event), which also
 * reports malformed events. The reference model of this rule is
 * tests/actors/test_native_scan.py::reference_scan; the tests compare the two on random and
 * mutated streams split at every byte.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

static const char KEY[] = "\"completion_tokens\":";
#define KEY_LEN ((Py_ssize_t)(sizeof(KEY) - 1))
static const char PREFIX[] = "data: {";
#define PREFIX_LEN ((Py_ssize_t)(sizeof(PREFIX) - 1))

static int is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

/* The start of the last KEY inside [lo, hi), or -1. */
static Py_ssize_t rfind_key(const char *s, Py_ssize_t lo, Py_ssize_t hi) {
    for (Py_ssize_t p = hi - KEY_LEN; p >= lo; p--) {
        if (s[p] == '"' && memcmp(s + p, KEY, KEY_LEN) == 0) {
            return p;
        }
    }
    return -1;
}

/* The count after the key at [k, end): >= 0, or -1 when it is not a plain small integer. */
static long long read_count(const char *s, Py_ssize_t k, Py_ssize_t end) {
    while (k < end && is_space(s[k])) {
        k++;
    }
    long long n = 0;
    int digits = 0;
    while (k < end && s[k] >= '0' && s[k] <= '9') {
        if (++digits > 18) {
            return -1;  /* no overflow: the general path (json.loads) takes such a value */
        }
        n = n * 10 + (s[k] - '0');
        k++;
    }
    if (digits == 0 || k >= end) {
        return -1;
    }
    if (s[k] != ',' && s[k] != '}' && !is_space(s[k])) {
        return -1;
    }
    return n;
}

PyDoc_STRVAR(scan_doc,
"scan(buf, prev, tokens) -> (end, prev, last_at, last_end, general)\n\n"
"Scan the well-formed events at the start of ``buf`` (bytes). For each event whose count\n"
"exceeds ``prev``, append ``count - prev`` to ``tokens`` (a list) and raise ``prev``.\n"
"``end``: where the scan stopped (the first byte not consumed); ``last_at`` / ``last_end``:\n"
"the line start and line end of the last well-formed event (-1 when none); ``general``: the\n"
"bytes from ``end`` hold a line the rule does not cover (True) or only an incomplete event\n"
"(False).");

static PyObject *scan(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 3 || !PyBytes_Check(args[0]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "scan(buf: bytes, prev: int, tokens: list)");
        return NULL;
    }
    const char *s = PyBytes_AS_STRING(args[0]);
    Py_ssize_t len = PyBytes_GET_SIZE(args[0]);
    long long prev = PyLong_AsLongLong(args[1]);
    if (prev == -1 && PyErr_Occurred()) {
        return NULL;
    }
    PyObject *tokens = args[2];
    Py_ssize_t start = 0, last_at = -1, last_end = -1;
    int general = memchr(s, '\r', (size_t)len) != NULL;  /* CR: line ends to normalise */
    while (!general) {
        const char *nl = memchr(s + start, '\n', (size_t)(len - start));
        if (nl == NULL) {
            break;
        }
        Py_ssize_t i = nl - s;
        if (i == len - 1) {  /* not yet known whether the event ends here */
            break;
        }
        if (s[i + 1] != '\n' || i == 0 || s[i - 1] != '}' || i - start < PREFIX_LEN
                || memcmp(s + start, PREFIX, PREFIX_LEN) != 0) {
            general = 1;
            break;
        }
        Py_ssize_t k = rfind_key(s, start, i);
        long long n = k < 0 ? -1 : read_count(s, k + KEY_LEN, i);
        if (n < 0) {
            general = 1;
            break;
        }
        if (n > prev) {
            PyObject *d = PyLong_FromLongLong(n - prev);
            if (d == NULL) {
                return NULL;
            }
            int rc = PyList_Append(tokens, d);
            Py_DECREF(d);
            if (rc < 0) {
                return NULL;
            }
            prev = n;
        }
        last_at = start;
        last_end = i;
        start = i + 2;
    }
    return Py_BuildValue("(nLnnO)", start, prev, last_at, last_end,
                         general ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_FASTCALL, scan_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_native_scan",
    "The per-read token scan of SGLang native streams (see NativeSink.feed).", -1, methods,
};

PyMODINIT_FUNC PyInit__native_scan(void) {
    return PyModule_Create(&module);
}
