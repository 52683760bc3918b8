/* Stage marks for callgrind: which part of the app the event loop's thread runs, at Python frame granularity.

   Built and loaded by `python -m bench.ledger` only (gcc, the interpreter's headers, valgrind's callgrind.h).
   A frame-evaluation hook (PEP 523, the hook debuggers and CPython 3.12's perf trampoline use) sees every Python
   frame start or resume. Each code object is put in a stage once (a Python function `classify(code) -> int`, its
   answer kept in the code object's extra slot, PEP 523's `_PyCode_SetExtra`); -1 means "the caller's stage"
   (helpers such as the standard library's). While marking is on, every change of stage on the marked thread asks
   callgrind to dump the costs since the last change (`CALLGRIND_DUMP_STATS_AT`, labelled with the stage that ran),
   so each dump is one stage's exclusive share, native code included (whatever C runs under a frame of the stage).
   The hook's own work is a few dozen instructions per frame; the interpreter also stops inlining Python-to-Python
   calls while a hook is set, so the marked total is a few per cent above the unmarked count: the ledger says so.

   Phases (`phases(begin, answer, answered)`): a dump's label also says whether the loop's thread was before the
   answer (phase 0: from a request's arrival to its answer's last byte written, the caller's critical path) or after
   it (phase 1: what the server does once the answer is on the wire). A frame of a `begin` code object (the server
   protocol's `data_received`) starts phase 0; a frame of the `answer` code object (the server's ASGI `send`) that
   returns, started or resumed, with its first argument's attribute `answered` true starts phase 1. */

#define PY_SSIZE_T_CLEAN
#define Py_BUILD_CORE 1
#include <Python.h>
#include "internal/pycore_frame.h"
#include <valgrind/callgrind.h>

#define MAX_STAGES 64

static PyObject *classify = NULL;
static Py_ssize_t extra_index = -1;
static char labels[2][MAX_STAGES][96];
static int stage_count = 0;
static int current = 0;       /* stage 0: no Python frame (the event loop's native code) */
static int marking = 0;
static int classifying = 0;
static unsigned long marked_thread = 0;
static long long frames[2][MAX_STAGES];  /* frames run (started or resumed) per phase and stage while marking */
static int phase = 0;         /* 0: before the answer, 1: after it (see `phases`) */
static PyObject *begin_codes = NULL;  /* a tuple of code objects that start phase 0 */
static PyObject *answer_code = NULL;
static PyObject *answered = NULL;

static void mark(int stage) { CALLGRIND_DUMP_STATS_AT(labels[phase][stage]); }

static int begins(PyObject *code) {
    if (begin_codes == NULL) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(begin_codes); i++) {
        if (PyTuple_GET_ITEM(begin_codes, i) == code) return 1;
    }
    return 0;
}

/* Whether the answer is complete: the `send` frame's first argument's attribute named `answered` (read in C, no
   Python frame; its instructions are not counted). */
static int is_answered(PyObject *self) {
    CALLGRIND_TOGGLE_COLLECT;
    int yes = 0;
    PyObject *answer = PyObject_GetAttr(self, answered);
    if (answer != NULL) {
        yes = PyObject_IsTrue(answer) == 1;
        Py_DECREF(answer);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    CALLGRIND_TOGGLE_COLLECT;
    return yes;
}

static int stage_of(PyCodeObject *code) {
    void *extra = NULL;
    if (_PyCode_GetExtra((PyObject *)code, extra_index, &extra) == 0 && extra != NULL) {
        return (int)(intptr_t)extra - 2;  /* stored +2 so that NULL means "not classified yet" */
    }
    if (classifying || classify == NULL) return -1;
    classifying = 1;
    if (marking) CALLGRIND_TOGGLE_COLLECT;  /* the classification is the bench's work, not the app's */
    int stage = -1;
    PyObject *answer = PyObject_CallOneArg(classify, (PyObject *)code);
    if (answer != NULL) {
        stage = (int)PyLong_AsLong(answer);
        Py_DECREF(answer);
    }
    if (PyErr_Occurred()) PyErr_Clear();
    if (stage < -1 || stage >= stage_count) stage = -1;
    _PyCode_SetExtra((PyObject *)code, extra_index, (void *)(intptr_t)(stage + 2));
    if (marking) CALLGRIND_TOGGLE_COLLECT;
    classifying = 0;
    return stage;
}

static PyObject *evaluate(PyThreadState *tstate, struct _PyInterpreterFrame *frame, int throwflag) {
    if (!marking) {
        stage_of(frame->f_code);  /* classified before marking starts (the warm-up), so marking rarely classifies */
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    if (PyThread_get_thread_ident() != marked_thread) {
        return _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    }
    PyObject *code = (PyObject *)frame->f_code;
    if (phase == 1 && begins(code)) {  /* a request arrives: what ran since its answer was the last one's after */
        mark(current);
        phase = 0;
    }
    PyObject *sender = NULL;
    if (code == answer_code && phase == 0 && frame->f_code->co_argcount > 0) {
        sender = frame->localsplus[0];
        Py_XINCREF(sender);
    }
    int stage = stage_of(frame->f_code);
    int before = current;
    if (stage >= 0 && stage != before) {
        mark(before);
        current = stage;
    }
    frames[phase][current]++;
    PyObject *result = _PyEval_EvalFrameDefault(tstate, frame, throwflag);
    if (sender != NULL) {
        if (phase == 0 && answered != NULL && is_answered(sender)) {  /* the answer's last byte is written */
            mark(current);
            phase = 1;
        }
        Py_DECREF(sender);
    }
    if (current != before) {
        mark(current);
        current = before;
    }
    return result;
}

static PyObject *install(PyObject *self, PyObject *args) {
    PyObject *names;
    PyObject *function;
    if (!PyArg_ParseTuple(args, "O!O", &PyList_Type, &names, &function)) return NULL;
    stage_count = (int)PyList_GET_SIZE(names);
    if (stage_count > MAX_STAGES) stage_count = MAX_STAGES;
    for (int i = 0; i < stage_count; i++) {
        const char *text = PyUnicode_AsUTF8(PyList_GET_ITEM(names, i));
        if (text == NULL) return NULL;
        snprintf(labels[0][i], sizeof labels[0][i], "stage %d phase 0", i);
        snprintf(labels[1][i], sizeof labels[1][i], "stage %d phase 1", i);
    }
    Py_XINCREF(function);
    classify = function;
    if (extra_index < 0) extra_index = _PyEval_RequestCodeExtraIndex(NULL);
    _PyInterpreterState_SetEvalFrameFunc(PyInterpreterState_Get(), evaluate);
    Py_RETURN_NONE;
}

static PyObject *start(PyObject *self, PyObject *unused) {
    marked_thread = PyThread_get_thread_ident();
    current = 0;
    phase = 0;
    for (int i = 0; i < MAX_STAGES; i++) frames[0][i] = frames[1][i] = 0;
    CALLGRIND_DUMP_STATS_AT("begin");
    marking = 1;
    Py_RETURN_NONE;
}

static PyObject *stop(PyObject *self, PyObject *unused) {
    if (marking) {
        marking = 0;
        mark(current);
    }
    Py_RETURN_NONE;
}

static PyObject *phases(PyObject *self, PyObject *args) {
    PyObject *begin, *answer, *function;
    if (!PyArg_ParseTuple(args, "O!OU", &PyTuple_Type, &begin, &answer, &function)) return NULL;
    Py_INCREF(begin);
    Py_INCREF(answer);
    Py_INCREF(function);
    begin_codes = begin;
    answer_code = answer;
    answered = function;
    Py_RETURN_NONE;
}

static PyObject *counts(PyObject *self, PyObject *unused) {
    PyObject *list = PyList_New(2 * stage_count);
    if (list == NULL) return NULL;
    for (int p = 0; p < 2; p++) {
        for (int i = 0; i < stage_count; i++) {
            PyList_SET_ITEM(list, p * stage_count + i, PyLong_FromLongLong(frames[p][i]));
        }
    }
    return list;
}

static PyMethodDef methods[] = {
    {"counts", counts, METH_NOARGS, "the frames run per stage while marking (phase 0's stages, then phase 1's)"},
    {"phases", phases, METH_VARARGS, "phases(begin codes, answer code, attribute): split each request's costs"},
    {"install", install, METH_VARARGS, "install(stage names, classify): set the frame hook"},
    {"start", start, METH_NOARGS, "mark stage changes on this thread from now on"},
    {"stop", stop, METH_NOARGS, "stop marking (the last stage's costs dumped)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "stage_marks", NULL, -1, methods};

PyMODINIT_FUNC PyInit_stage_marks(void) { return PyModule_Create(&module); }
