/* libioloom-async-python: runs Python plugins of libioloom-async (docs/async.md, Plugins). libioloom-async loads
 * this library with dlopen only when a configuration names a Python plugin, after the interpreter's libpython
 * (RTLD_GLOBAL, for numpy's extension modules), so users without Python plugins never load Python. A plugin is a
 * function of a script, called as function(event, iteration, block, arrays) with arrays a dict of numpy arrays
 * (by variable; for a node-scope plugin, block -1, by (variable, block)) viewing the blocks where they are (the
 * shared memory on a dedicated core): no copy. The interpreter starts once, in the writer's process, and stays
 * until the process exits (numpy cannot be initialised twice); in a process that already runs Python, it is that
 * interpreter. Every call holds the GIL (PyGILState), so any thread may run a plugin. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdio.h>
#include "ioloom_async_plugin.h"

#define BRIDGE_API __attribute__((visibility("default"))) /* the two calls libioloom-async finds with dlsym */

/* The Python half: loading a script's function, and calling it with numpy views of the blocks. */
static const char BOOT[] =
    "import importlib.util, sys, traceback\n"
    "import numpy\n"
    "def load(path, function):\n"
    "    spec = importlib.util.spec_from_file_location('ioloom_async_plugin_%d' % len(sys.modules), path)\n"
    "    if spec is None:\n"
    "        raise ImportError(f'{path}: not a Python script')\n"
    "    module = importlib.util.module_from_spec(spec)\n"
    "    spec.loader.exec_module(module)\n"
    "    found = getattr(module, function, None)\n"
    "    if not callable(found):\n"
    "        raise LookupError(f'{path} has no function {function}')\n"
    "    return found\n"
    "def call(function, event, iteration, block, blocks):\n"
    "    arrays = {(name if block >= 0 else (name, owner)): numpy.frombuffer(view, dtype).reshape(shape)\n"
    "              for name, dtype, shape, view, owner in blocks}\n"
    "    try:\n"
    "        function(event, iteration, block, arrays)\n"
    "    except BaseException:\n"
    "        print(f'ioloom-async: python plugin {function.__name__} failed at iteration {iteration}, block '\n"
    "              f'{block}:', file=sys.stderr)\n"
    "        traceback.print_exc()\n"
    "    del arrays\n"
    "    for view in blocks:\n"
    "        try:\n"
    "            view[3].release()\n"
    "        except BufferError:\n"
    "            print('ioloom-async: a python plugin kept a block past its call: copy it (numpy.array(a)) '\n"
    "                  'to keep it', file=sys.stderr)\n";

static PyObject *load_fn, *call_fn; /* BOOT's functions, in a module that lives as long as the process */

/* The interpreter named in the configuration, unless this process already runs one. */
static int start_interpreter(const char *executable, char *msg, size_t size) {
    if (Py_IsInitialized()) return 0;
    PyConfig config;
    PyConfig_InitPythonConfig(&config);
    config.install_signal_handlers = 0; /* the program's signal handlers stay its own */
    PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, executable);
    if (!PyStatus_Exception(status)) status = Py_InitializeFromConfig(&config);
    PyConfig_Clear(&config);
    if (PyStatus_Exception(status))
        return snprintf(msg, size, "python plugins: cannot start %s: %s", executable,
                        status.err_msg ? status.err_msg : "unknown error"),
               -1;
    PyEval_SaveThread(); /* the GIL is taken per call */
    return 0;
}

/* The Python error being raised, as one line in msg. */
static void error_line(char *msg, size_t size, const char *what) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *s = text ? PyUnicode_AsUTF8(text) : NULL;
    snprintf(msg, size, "python plugins: %s: %.400s", what, s ? s : "unknown error");
    Py_XDECREF(text), Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(trace);
    PyErr_Clear();
}

static int boot(char *msg, size_t size) {
    if (call_fn) return 0;
    PyObject *namespace = PyModule_GetDict(PyImport_AddModule("ioloom_async_python"));
    PyDict_SetItemString(namespace, "__builtins__", PyEval_GetBuiltins());
    PyObject *done = PyRun_String(BOOT, Py_file_input, namespace, namespace);
    if (!done) return error_line(msg, size, "cannot import numpy in the interpreter named by `python`"), -1;
    Py_DECREF(done);
    load_fn = PyDict_GetItemString(namespace, "load");
    call_fn = PyDict_GetItemString(namespace, "call");
    return 0;
}

BRIDGE_API void *ioloom_async_python_load(const char *executable, const char *script, const char *function, char *msg,
                                          size_t size) {
    if (start_interpreter(executable, msg, size)) return NULL;
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *found = boot(msg, size) ? NULL : PyObject_CallFunction(load_fn, "ss", script, function);
    if (!found && call_fn) error_line(msg, size, script);
    PyGILState_Release(gil);
    return found;
}

/* One block as (variable, dtype, shape, memoryview of its bytes, its client's block id). */
static PyObject *block_tuple(const struct ioloom_async_block *b) {
    PyObject *shape = PyTuple_New(b->ndims);
    for (int d = 0; d < b->ndims; d++) PyTuple_SET_ITEM(shape, d, PyLong_FromLong(b->dimensions[d]));
    PyObject *view = PyMemoryView_FromMemory((char *)b->data, (Py_ssize_t)b->nbytes, PyBUF_READ);
    return Py_BuildValue("(ssNNi)", b->variable, b->type, shape, view, b->block);
}

BRIDGE_API void ioloom_async_python_call(void *plugin, const char *event, long long iteration, int block,
                                         const struct ioloom_async_block *blocks, int nblocks) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *list = PyList_New(nblocks);
    for (int i = 0; i < nblocks; i++) PyList_SET_ITEM(list, i, block_tuple(&blocks[i]));
    PyObject *done = PyObject_CallFunction(call_fn, "OsLiN", (PyObject *)plugin, event, iteration, block, list);
    if (!done) PyErr_Print(); /* call() reports the plugin's own errors; this is the bridge failing */
    Py_XDECREF(done);
    PyGILState_Release(gil);
}
