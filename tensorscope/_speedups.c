/* tensorscope._speedups: an optional accelerator for the write wrappers (see NOTE [The compiled lane] in
 * tensorscope/instrument/speedups.py). Built by `pip install .` / `pip install -e .` or
 * `python setup.py build_ext --inplace` where a C compiler is there; without it the pure-Python path runs, with
 * identical results. CPython C API only, Python 3.10 and later.
 *
 * LaneWrite(op, orig, fallback, lanes, inspectable, function_modes, ref) is a write wrapper's body: called with
 * the program's arguments, it records a write whose caller is a step's lane (NOTE [A step's lane] in
 * tensorscope/instrument/optimizer_steps.py) exactly as patches.make_write's Python lane does, and hands every
 * other call to `fallback` (that Python body) unchanged. It has no Python frame: the caller's frame is the
 * interpreter's current one, and an exception of the op reaches the program with no frame of tensorscope's.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <frameobject.h>
#include <structmember.h>

typedef struct {
    PyObject_HEAD
    PyObject *op;          /* the op's name (str) */
    PyObject *orig;        /* torch's method */
    PyObject *fallback;    /* the Python body (patches.make_write's `write`) */
    PyObject *lanes;       /* optimizer_steps.LANES: frame -> _Step */
    PyObject *inspectable; /* recorder._INSPECTABLE: type -> verdict */
    PyObject *modes;       /* torch._C._len_torch_function_stack */
    PyObject *ref;         /* weakref.ref */
    PyObject *step_type;   /* optimizer_steps._Step (its slots read in place: see step_slot) */
    Py_ssize_t hits;       /* the writes this lane recorded (for the tests) */
} LaneWrite;

static PyObject *s_busy, *s_index, *s_writes, *s_lib, *s_version, *s_input, *s_self;

/* The byte offsets of _Step's slots busy, index, writes and lib, read from its member descriptors when the first
 * LaneWrite is made (-1: not known, the attribute is read by name). A step of exactly that type has its slots
 * there; any other object is read by name. */
enum { SLOT_BUSY, SLOT_INDEX, SLOT_WRITES, SLOT_LIB, N_SLOTS };
static Py_ssize_t slot_offsets[N_SLOTS] = {-1, -1, -1, -1};
static PyTypeObject *slot_type = NULL;

static void
find_slots(PyObject *type)
{
    PyObject **names[N_SLOTS] = {&s_busy, &s_index, &s_writes, &s_lib};
    Py_ssize_t found[N_SLOTS];
    int i;
    if (slot_type != NULL || !PyType_Check(type) || ((PyTypeObject *)type)->tp_dict == NULL)
        return;
    for (i = 0; i < N_SLOTS; i++) {
        PyObject *d = PyDict_GetItemWithError(((PyTypeObject *)type)->tp_dict, *names[i]);
        if (d == NULL || Py_TYPE(d) != &PyMemberDescr_Type) {
            PyErr_Clear();
            return;
        }
        PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
        /* the type's own slot: a descriptor of another class's (`busy = Other.busy`) has Other's offset */
        if (PyDescr_TYPE(d) != (PyTypeObject *)type || m->type != T_OBJECT_EX || (m->flags & READONLY))
            return;
        found[i] = m->offset;
    }
    for (i = 0; i < N_SLOTS; i++)
        slot_offsets[i] = found[i];
    Py_INCREF(type);
    slot_type = (PyTypeObject *)type;
}

/* step.<slot> as a new reference (NULL with AttributeError when unset, as python reads it) */
static PyObject *
step_get(PyObject *step, int slot, PyObject *name)
{
    if (Py_TYPE(step) == slot_type) {
        PyObject *v = *(PyObject **)((char *)step + slot_offsets[slot]);
        if (v == NULL) {
            PyErr_SetObject(PyExc_AttributeError, name);
            return NULL;
        }
        Py_INCREF(v);
        return v;
    }
    return PyObject_GetAttr(step, name);
}

static int
lw_traverse(LaneWrite *self, visitproc visit, void *arg)
{
    Py_VISIT(self->op);
    Py_VISIT(self->orig);
    Py_VISIT(self->fallback);
    Py_VISIT(self->lanes);
    Py_VISIT(self->inspectable);
    Py_VISIT(self->modes);
    Py_VISIT(self->ref);
    Py_VISIT(self->step_type);
    return 0;
}

static int
lw_clear(LaneWrite *self)
{
    Py_CLEAR(self->op);
    Py_CLEAR(self->orig);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->lanes);
    Py_CLEAR(self->inspectable);
    Py_CLEAR(self->modes);
    Py_CLEAR(self->ref);
    Py_CLEAR(self->step_type);
    return 0;
}

static void
lw_dealloc(LaneWrite *self)
{
    PyObject_GC_UnTrack(self);
    lw_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyObject *
lw_new(PyTypeObject *type, PyObject *args, PyObject *kwds)
{
    PyObject *op, *orig, *fallback, *lanes, *inspectable, *modes, *ref, *step_type;
    if (kwds != NULL && PyDict_GET_SIZE(kwds)) {
        PyErr_SetString(PyExc_TypeError, "LaneWrite takes positional arguments only");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OOOO!O!OOO:LaneWrite", &op, &orig, &fallback, &PyDict_Type, &lanes,
                          &PyDict_Type, &inspectable, &modes, &ref, &step_type))
        return NULL;
    find_slots(step_type);
    LaneWrite *self = (LaneWrite *)type->tp_alloc(type, 0);
    if (self == NULL)
        return NULL;
    Py_INCREF(op); self->op = op;
    Py_INCREF(orig); self->orig = orig;
    Py_INCREF(fallback); self->fallback = fallback;
    Py_INCREF(lanes); self->lanes = lanes;
    Py_INCREF(inspectable); self->inspectable = inspectable;
    Py_INCREF(modes); self->modes = modes;
    Py_INCREF(ref); self->ref = ref;
    Py_INCREF(step_type); self->step_type = step_type;
    return (PyObject *)self;
}

/* target._version: what PyObject_GetAttr(target, "_version") returns, with generic attribute access's own look-up
 * skipped where it would find a data descriptor on the type (torch's getter): the same descriptor's tp_descr_get
 * called the same way (_PyObject_GenericGetAttrWithDict calls a data descriptor before it reads any instance
 * dict). Any other type (its own __getattribute__ or __getattr__, no data descriptor) is read by name. */
static PyObject *
version_of(PyObject *target)
{
#if PY_VERSION_HEX < 0x030E0000
    PyTypeObject *tp = Py_TYPE(target);
    if (tp->tp_getattro == PyObject_GenericGetAttr) {
        PyObject *descr = _PyType_Lookup(tp, s_version); /* borrowed */
        if (descr != NULL && Py_TYPE(descr)->tp_descr_get != NULL && Py_TYPE(descr)->tp_descr_set != NULL) {
            PyObject *res;
            Py_INCREF(descr);
            res = Py_TYPE(descr)->tp_descr_get(descr, target, (PyObject *)tp);
            Py_DECREF(descr);
            return res;
        }
    }
#endif
    return PyObject_GetAttr(target, s_version);
}

/* speedc21: a write's version read in place where torch's layout was found (the block at the end of this file);
 * `modes` NULL where the caller has just found no torch-function mode, else the modes' count, asked again */
static PyObject *version_read(PyObject *target, PyObject *modes);

/* Appends the write's tuple to step.writes, as the Python lane does inside its `try: ... except Exception: pass`
 * (a step closed meanwhile by another thread has index and writes None). Returns -1 only for an exception that is
 * not an Exception (left set). */
static int
lw_record(LaneWrite *self, PyObject *step, PyObject *target, PyObject *v0)
{
    PyObject *writes = NULL, *index = NULL, *key = NULL, *item = NULL, *lib = NULL, *v1 = NULL, *tup = NULL;
    int rc = -1;
    writes = step_get(step, SLOT_WRITES, s_writes);
    if (writes == NULL)
        goto done;
    index = step_get(step, SLOT_INDEX, s_index);
    if (index == NULL)
        goto done;
    key = PyLong_FromVoidPtr(target); /* id(target) */
    if (key == NULL)
        goto done;
    if (!PyDict_Check(index)) { /* None: the step was closed */
        PyErr_SetString(PyExc_AttributeError, "step closed");
        goto done;
    }
    item = PyDict_GetItemWithError(index, key);
    if (item != NULL) {
        Py_INCREF(item);
    } else {
        if (PyErr_Occurred())
            goto done;
        item = PyObject_CallOneArg(self->ref, target);
        if (item == NULL)
            goto done;
    }
    lib = step_get(step, SLOT_LIB, s_lib);
    if (lib == NULL)
        goto done;
    v1 = version_read(target, self->modes);
    if (v1 == NULL)
        goto done;
    tup = PyTuple_Pack(5, item, self->op, lib, v0, v1);
    if (tup == NULL)
        goto done;
    if (PyList_CheckExact(writes)) {
        if (PyList_Append(writes, tup) < 0)
            goto done;
    } else {
        PyObject *r = PyObject_CallMethod(writes, "append", "O", tup);
        if (r == NULL)
            goto done;
        Py_DECREF(r);
    }
    rc = 0;
done:
    if (rc < 0 && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        rc = 0;
    }
    Py_XDECREF(writes);
    Py_XDECREF(index);
    Py_XDECREF(key);
    Py_XDECREF(item);
    Py_XDECREF(lib);
    Py_XDECREF(v1);
    Py_XDECREF(tup);
    return rc;
}

static int
lw_set_busy(PyObject *step, PyObject *value)
{
    if (Py_TYPE(step) == slot_type) { /* step.busy = value, in place */
        PyObject **p = (PyObject **)((char *)step + slot_offsets[SLOT_BUSY]);
        PyObject *old = *p;
        Py_INCREF(value);
        *p = value;
        Py_XDECREF(old);
        return 0;
    }
    return PyObject_SetAttr(step, s_busy, value);
}

/* The lane, or NULL with no exception set when the call is not the lane's (the caller then calls fallback). */
static PyObject *
lw_lane(LaneWrite *self, PyObject *step, PyObject *args, PyObject *kwargs, int *taken)
{
    PyObject *busy, *target = NULL, *verdict, *n, *v0, *out;
    int truth;
    *taken = 0;
    busy = step_get(step, SLOT_BUSY, s_busy);
    if (busy == NULL)
        return NULL;
    truth = PyObject_IsTrue(busy);
    Py_DECREF(busy);
    if (truth != 0)
        return NULL; /* busy (or an error, left set) */
    if (PyTuple_GET_SIZE(args) > 0) {
        target = PyTuple_GET_ITEM(args, 0);
    } else if (kwargs != NULL) { /* kwargs.get("input", kwargs.get("self")) */
        target = PyDict_GetItemWithError(kwargs, s_input);
        if (target == NULL) {
            if (PyErr_Occurred())
                return NULL;
            target = PyDict_GetItemWithError(kwargs, s_self);
            if (target == NULL && PyErr_Occurred())
                return NULL;
        }
    }
    if (target == NULL)
        target = Py_None;
    Py_INCREF(target);
    verdict = PyDict_GetItemWithError(self->inspectable, (PyObject *)Py_TYPE(target));
    if (verdict == NULL) {
        Py_DECREF(target);
        return NULL;
    }
    truth = PyObject_IsTrue(verdict);
    if (truth != 1) {
        Py_DECREF(target);
        return NULL;
    }
    n = PyObject_CallNoArgs(self->modes);
    if (n == NULL) {
        Py_DECREF(target);
        return NULL;
    }
    truth = PyObject_IsTrue(n);
    Py_DECREF(n);
    if (truth != 0) {
        Py_DECREF(target);
        return NULL;
    }
    *taken = 1;
    self->hits++;
    v0 = version_read(target, NULL);
    if (v0 == NULL) {
        Py_DECREF(target);
        return NULL;
    }
    if (lw_set_busy(step, Py_True) < 0) {
        Py_DECREF(v0);
        Py_DECREF(target);
        return NULL;
    }
    out = PyObject_Call(self->orig, args, kwargs);
    if (out == NULL) { /* the op's exception, as it is: `finally: step.busy = False` */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        if (lw_set_busy(step, Py_False) < 0) {
            Py_XDECREF(type);
            Py_XDECREF(value);
            Py_XDECREF(tb);
        } else {
            PyErr_Restore(type, value, tb);
        }
        Py_DECREF(v0);
        Py_DECREF(target);
        return NULL;
    }
    if (lw_set_busy(step, Py_False) < 0 || lw_record(self, step, target, v0) < 0) {
        Py_DECREF(out);
        out = NULL;
    }
    Py_DECREF(v0);
    Py_DECREF(target);
    return out;
}

static PyObject *
lw_call(LaneWrite *self, PyObject *args, PyObject *kwargs)
{
    if (PyDict_GET_SIZE(self->lanes)) {
        PyFrameObject *frame = PyEval_GetFrame(); /* borrowed: the caller's (this wrapper has no frame) */
        if (frame != NULL) {
            PyObject *step = PyDict_GetItemWithError(self->lanes, (PyObject *)frame);
            if (step != NULL) {
                int taken;
                PyObject *out;
                Py_INCREF(step); /* another thread may take it out of LANES while the op runs */
                out = lw_lane(self, step, args, kwargs, &taken);
                Py_DECREF(step);
                if (out != NULL || taken || PyErr_Occurred())
                    return out;
            } else if (PyErr_Occurred()) {
                return NULL;
            }
        }
    }
    return PyObject_Call(self->fallback, args, kwargs);
}

static PyObject *
lw_get_fallback(LaneWrite *self, void *closure)
{
    Py_INCREF(self->fallback);
    return self->fallback;
}

static PyObject *
lw_get_hits(LaneWrite *self, void *closure)
{
    return PyLong_FromSsize_t(self->hits);
}

static PyGetSetDef lw_getset[] = {
    {"hits", (getter)lw_get_hits, NULL, "the calls the compiled lane took", NULL},
    {"fallback", (getter)lw_get_fallback, NULL, "the pure-Python body", NULL},
    {NULL}
};

static PyTypeObject LaneWriteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tensorscope._speedups.LaneWrite",
    .tp_basicsize = sizeof(LaneWrite),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A write wrapper's body whose step's lane is compiled (see tensorscope/instrument/speedups.py).",
    .tp_new = lw_new,
    .tp_dealloc = (destructor)lw_dealloc,
    .tp_traverse = (traverseproc)lw_traverse,
    .tp_clear = (inquiry)lw_clear,
    .tp_call = (ternaryfunc)lw_call,
    .tp_getset = lw_getset,
};

/* log_writes(writes, log, storage_key, state_ids, opt, head, max_storages, max_writes): OptimizerSteps.log's
 * loop (tensorscope/instrument/optimizer_steps.py), entry by entry the same. `writes` holds the step's tuples
 * (tensor or weak reference, op, torch's code, version before, version after); `log` is the tracker's write log
 * (an OrderedDict: storage key -> entries); `head` is (aseq, grad_enabled, code, lasti, line). An exception of
 * `storage_key` skips the write (as the Python loop's `except Exception: continue`); any other goes out. */
static PyObject *s_move_to_end, *s_popitem, *popitem_kwargs, *empty_tuple;

static PyObject *
log_writes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *writes, *log, *storage_key, *state_ids, *opt, *head;
    Py_ssize_t max_storages, max_writes, i;
    PyObject *w = NULL, *made = NULL, *prev = NULL, *recs = NULL, *t = NULL, *key = NULL, *move = NULL;
    PyObject *aseq, *grad_enabled, *code, *lasti, *line;
    if (nargs != 8) { /* METH_FASTCALL: no argument tuple to parse (PyArg_ParseTuple was ~1.8k a step) */
        PyErr_SetString(PyExc_TypeError, "log_writes takes 8 arguments");
        return NULL;
    }
    writes = args[0];
    log = args[1];
    storage_key = args[2];
    state_ids = args[3];
    opt = args[4];
    head = args[5];
    if (!PyList_Check(writes) || !PyTuple_Check(head) || !PyLong_Check(args[6]) || !PyLong_Check(args[7])) {
        PyErr_SetString(PyExc_TypeError, "log_writes: a list of writes, a head tuple and two ints");
        return NULL;
    }
    max_storages = PyLong_AsSsize_t(args[6]);
    max_writes = PyLong_AsSsize_t(args[7]);
    if ((max_storages == -1 || max_writes == -1) && PyErr_Occurred())
        return NULL;
    if (PyTuple_GET_SIZE(head) != 5 || !PyDict_Check(log)) {
        PyErr_SetString(PyExc_TypeError, "log_writes: head of 5 and a dict log");
        return NULL;
    }
    aseq = PyTuple_GET_ITEM(head, 0);
    grad_enabled = PyTuple_GET_ITEM(head, 1);
    code = PyTuple_GET_ITEM(head, 2);
    lasti = PyTuple_GET_ITEM(head, 3);
    line = PyTuple_GET_ITEM(head, 4);
    Py_INCREF(writes); /* the caller's reference may go */
    /* the list's length read at each turn and the write held (the next turn lets it go): the calls below run
     * Python code (the storage key, a tensor's finalizers) that may change the list, as a Python loop allows */
    for (i = 0; i < PyList_GET_SIZE(writes); i++) {
        PyObject *entry, *r;
        Py_XSETREF(w, Py_NewRef(PyList_GET_ITEM(writes, i)));
        if (!PyTuple_Check(w) || PyTuple_GET_SIZE(w) != 5) {
            PyErr_SetString(PyExc_TypeError, "log_writes: a write of 5");
            goto error;
        }
        PyObject *raw = PyTuple_GET_ITEM(w, 0);
        if (raw != prev) {
            if (PyWeakref_CheckRefExact(raw)) { /* a tensor not in the index: a state tensor made, or a temporary */
                t = PyObject_CallNoArgs(raw);
                if (t == NULL)
                    goto error;
                if (t == Py_None) {
                    Py_CLEAR(t);
                    continue;
                }
                if (made == NULL) {
                    made = PyObject_CallOneArg(state_ids, opt);
                    if (made == NULL)
                        goto error;
                }
                PyObject *ident = PyLong_FromVoidPtr(t);
                if (ident == NULL)
                    goto error;
                int in = PySequence_Contains(made, ident);
                Py_DECREF(ident);
                if (in < 0)
                    goto error;
                if (!in) {
                    Py_CLEAR(t);
                    continue;
                }
            } else {
                t = raw;
                Py_INCREF(t);
            }
            key = PyObject_CallOneArg(storage_key, t);
            if (key == NULL) {
                if (!PyErr_ExceptionMatches(PyExc_Exception))
                    goto error;
                PyErr_Clear(); /* no storage: the wrappers log none either */
                Py_CLEAR(t);
                continue;
            }
            Py_XDECREF(recs);
            recs = PyDict_GetItemWithError(log, key);
            if (recs == NULL) {
                if (PyErr_Occurred())
                    goto error;
                if (PyDict_GET_SIZE(log) >= max_storages) { /* least recently written storage out first */
                    r = PyObject_GetAttr(log, s_popitem);
                    if (r == NULL)
                        goto error;
                    PyObject *popped = PyObject_Call(r, empty_tuple, popitem_kwargs);
                    Py_DECREF(r);
                    if (popped == NULL)
                        goto error;
                    Py_DECREF(popped);
                }
                recs = PyList_New(0);
                if (recs == NULL || PyObject_SetItem(log, key, recs) < 0)
                    goto error;
            } else {
                Py_INCREF(recs);
                if (move == NULL && (move = PyObject_GetAttr(log, s_move_to_end)) == NULL)
                    goto error; /* log.move_to_end, looked up once a call */
                r = PyObject_CallOneArg(move, key);
                if (r == NULL)
                    goto error;
                Py_DECREF(r);
            }
            Py_CLEAR(key);
            Py_XDECREF(prev);
            prev = t; /* the reference moves */
            t = NULL;
        }
        if (!PyList_Check(recs)) {
            PyErr_SetString(PyExc_TypeError, "log_writes: a storage's entries are a list");
            goto error;
        }
        entry = PyTuple_Pack(10, aseq, PyTuple_GET_ITEM(w, 3), PyTuple_GET_ITEM(w, 4), PyTuple_GET_ITEM(w, 1),
                             grad_enabled, code, lasti, line, PyTuple_GET_ITEM(w, 2), Py_None);
        if (entry == NULL)
            goto error;
        Py_ssize_t size = PyList_GET_SIZE(recs);
        if (size >= max_writes && size > 0 && PyList_CheckExact(recs)) {
            /* `del recs[0]; recs.append(entry)` at the cap, as one shift of the list's items in place: the
             * same list after, without list_ass_slice's temporary copy and resize. The oldest entry is let go
             * once the list is whole again. */
            PyObject **items = ((PyListObject *)recs)->ob_item, *oldest = items[0];
            memmove(items, items + 1, (size_t)(size - 1) * sizeof(PyObject *));
            items[size - 1] = entry; /* the reference moves */
            Py_DECREF(oldest);
            continue;
        }
        if (size >= max_writes && PySequence_DelItem(recs, 0) < 0) {
            Py_DECREF(entry);
            goto error;
        }
        if (PyList_Append(recs, entry) < 0) {
            Py_DECREF(entry);
            goto error;
        }
        Py_DECREF(entry);
    }
    Py_XDECREF(made);
    Py_XDECREF(prev);
    Py_XDECREF(recs);
    Py_XDECREF(w);
    Py_XDECREF(move);
    Py_DECREF(writes);
    Py_RETURN_NONE;
error:
    Py_XDECREF(w);
    Py_XDECREF(move);
    Py_XDECREF(made);
    Py_XDECREF(prev);
    Py_XDECREF(recs);
    Py_XDECREF(t);
    Py_XDECREF(key);
    Py_DECREF(writes);
    return NULL;
}

/* step_index(param_groups, state_values, tensor_type): optimizer_steps._index's dict, id -> tensor of each
 * parameter (each group's "params"), its .grad where not None, and each state tensor (isinstance of tensor_type)
 * of each non-empty state in `state_values` (the caller's `opt.state.values()`), inserted in the Python loop's
 * order with the same reads (group["params"], p.grad, s.values(), isinstance): the same dict, or the same
 * exception. */
static PyObject *s_params, *s_grad, *s_values;

static int
index_put(PyObject *index, PyObject *t)
{
    PyObject *key = PyLong_FromVoidPtr(t); /* id(t) */
    int rc;
    if (key == NULL)
        return -1;
    rc = PyDict_SetItem(index, key, t);
    Py_DECREF(key);
    return rc;
}

static PyObject *
step_index(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *groups, *states, *tensor_type, *index, *it = NULL, *group = NULL, *params = NULL, *pit = NULL;
    PyObject *p = NULL, *g = NULL, *s = NULL, *vals = NULL, *vit = NULL, *v = NULL;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "step_index takes 3 arguments");
        return NULL;
    }
    groups = args[0];
    states = args[1];
    tensor_type = args[2];
    index = PyDict_New();
    if (index == NULL)
        return NULL;
    if ((it = PyObject_GetIter(groups)) == NULL)
        goto error;
    while ((group = PyIter_Next(it)) != NULL) {
        if ((params = PyObject_GetItem(group, s_params)) == NULL || (pit = PyObject_GetIter(params)) == NULL)
            goto error;
        while ((p = PyIter_Next(pit)) != NULL) {
            if (index_put(index, p) < 0 || (g = PyObject_GetAttr(p, s_grad)) == NULL)
                goto error;
            if (g != Py_None && index_put(index, g) < 0)
                goto error;
            Py_CLEAR(g);
            Py_CLEAR(p);
        }
        if (PyErr_Occurred())
            goto error;
        Py_CLEAR(pit);
        Py_CLEAR(params);
        Py_CLEAR(group);
    }
    if (PyErr_Occurred())
        goto error;
    Py_CLEAR(it);
    if ((it = PyObject_GetIter(states)) == NULL)
        goto error;
    while ((s = PyIter_Next(it)) != NULL) {
        int truth = PyObject_IsTrue(s);
        if (truth < 0)
            goto error;
        if (truth) {
            if (PyDict_CheckExact(s)) { /* s.values() of a dict: its values in order, no call */
                Py_ssize_t pos = 0;
                PyObject *key, *value;
                while (PyDict_Next(s, &pos, &key, &value)) {
                    int is = PyObject_IsInstance(value, tensor_type);
                    if (is < 0)
                        goto error;
                    if (is) { /* PyObject_IsInstance may run Python code (__instancecheck__): hold value */
                        Py_INCREF(value);
                        int rc = index_put(index, value);
                        Py_DECREF(value);
                        if (rc < 0)
                            goto error;
                    }
                }
            } else {
                if ((vals = PyObject_CallMethodNoArgs(s, s_values)) == NULL || (vit = PyObject_GetIter(vals)) == NULL)
                    goto error;
                while ((v = PyIter_Next(vit)) != NULL) {
                    int is = PyObject_IsInstance(v, tensor_type);
                    if (is < 0 || (is && index_put(index, v) < 0))
                        goto error;
                    Py_CLEAR(v);
                }
                if (PyErr_Occurred())
                    goto error;
                Py_CLEAR(vit);
                Py_CLEAR(vals);
            }
        }
        Py_CLEAR(s);
    }
    if (PyErr_Occurred())
        goto error;
    Py_DECREF(it);
    return index;
error:
    Py_XDECREF(it);
    Py_XDECREF(group);
    Py_XDECREF(params);
    Py_XDECREF(pit);
    Py_XDECREF(p);
    Py_XDECREF(g);
    Py_XDECREF(s);
    Py_XDECREF(vals);
    Py_XDECREF(vit);
    Py_XDECREF(v);
    Py_DECREF(index);
    return NULL;
}

/* add_count(counts, key, n): recorder.add_count's `counts[key] = counts.get(key, 0) + n` (n > 0; nothing for
 * n <= 0), in one C call as the Python one (NOTE [Site counts from several threads] in recorder.py). */
static PyObject *s_get, *zero;

static PyObject *
add_count(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *counts, *key, *n, *old, *sum;
    int positive;
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError, "add_count takes 3 arguments");
        return NULL;
    }
    counts = args[0];
    key = args[1];
    n = args[2];
    positive = PyObject_RichCompareBool(n, zero, Py_GT);
    if (positive <= 0)
        return positive < 0 ? NULL : Py_NewRef(Py_None);
    if (PyDict_CheckExact(counts)) {
        old = PyDict_GetItemWithError(counts, key);
        if (old == NULL) {
            if (PyErr_Occurred())
                return NULL;
            old = zero;
        }
        Py_INCREF(old);
    } else {
        old = PyObject_CallMethodObjArgs(counts, s_get, key, zero, NULL);
        if (old == NULL)
            return NULL;
    }
    sum = PyNumber_Add(old, n);
    Py_DECREF(old);
    if (sum == NULL)
        return NULL;
    if (PyObject_SetItem(counts, key, sum) < 0) {
        Py_DECREF(sum);
        return NULL;
    }
    Py_DECREF(sum);
    Py_RETURN_NONE;
}

static PyObject *
slots_known(PyObject *module, PyObject *unused)
{
    if (slot_type == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(Onnnn)", (PyObject *)slot_type, slot_offsets[0], slot_offsets[1], slot_offsets[2],
                         slot_offsets[3]);
}

/* speedn19: defined in its block at the end of this file */
static PyObject *finite_params(PyObject *module, PyObject *args);

/* speeds19: a counted line's calls in C (the block at the end of this file) */
static PyObject *counted_call(PyObject *module, PyObject *args);

/* speedv20: defined in its block at the end of this file */
static PyObject *kept_on_alias(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
static PyObject *finite_scalar(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
/* speedw20: a counted line's in-place writes in C (the block at the end of this file) */
static PyObject *counted_write(PyObject *module, PyObject *args);
/* speedc21: a storage's key read in place (the block at the end of this file) */
static PyObject *storage_key_setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs);
static PyObject *storage_key(PyObject *module, PyObject *t);
static PyObject *version_setup(PyObject *module, PyObject *probes);
static PyObject *version_in_place(PyObject *module, PyObject *t);

static PyMethodDef speedups_methods[] = {
    {"slots_known", (PyCFunction)slots_known, METH_NOARGS, "(_Step, its slots' offsets) once found, else None."},
    {"log_writes", (PyCFunction)(void (*)(void))log_writes, METH_FASTCALL, "OptimizerSteps.log's loop (see the C source)."},
    {"step_index", (PyCFunction)(void (*)(void))step_index, METH_FASTCALL, "optimizer_steps._index's dict (see the C source)."},
    {"add_count", (PyCFunction)(void (*)(void))add_count, METH_FASTCALL, "recorder.add_count in C (see the C source)."},
    /* speeds19 */
    {"counted_call", (PyCFunction)counted_call, METH_VARARGS, "A counted line's call wrapper (see the C source)."},
    /* speedn19 */
    {"finite_params", (PyCFunction)finite_params, METH_VARARGS,
     "Whether an optimizer's floating CPU parameters are all finite, read in place (see the C source)."},
    /* speedv20 */
    {"kept_on_alias", (PyCFunction)(void (*)(void))kept_on_alias, METH_FASTCALL,
     "KeptValues.on_alias's method descriptor in C (see the C source)."},
    {"finite_scalar", (PyCFunction)(void (*)(void))finite_scalar, METH_FASTCALL,
     "Whether a loss needs no finite check, its value read in place (see the C source)."},
    /* speedw20 */
    {"counted_write", (PyCFunction)counted_write, METH_VARARGS, "A write wrapper's body with its counted writes in C (see the C source)."},
    /* speedc21 */
    {"storage_key_setup", (PyCFunction)(void (*)(void))storage_key_setup, METH_FASTCALL,
     "Find where a tensor's StorageImpl address lies, from probe tensors (see the C source)."},
    {"storage_key", (PyCFunction)storage_key, METH_O, "A tensor's storage key, read in place where found (see the C source)."},
    {"version_setup", (PyCFunction)version_setup, METH_O,
     "Find where a tensor's version lies, from probe tensors (see the C source)."},
    {"version_in_place", (PyCFunction)version_in_place, METH_O, "A tensor's version read in place, or None (see the C source)."},
    {NULL, NULL, 0, NULL}
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT, "tensorscope._speedups",
    "tensorscope's optional compiled accelerator (see tensorscope/instrument/speedups.py).", -1, speedups_methods,
};

PyMODINIT_FUNC
PyInit__speedups(void)
{
    PyObject *m;
    if (PyType_Ready(&LaneWriteType) < 0)
        return NULL;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(s_busy, "busy");
    INTERN(s_index, "index");
    INTERN(s_writes, "writes");
    INTERN(s_lib, "lib");
    INTERN(s_version, "_version");
    INTERN(s_input, "input");
    INTERN(s_self, "self");
    INTERN(s_move_to_end, "move_to_end");
    INTERN(s_popitem, "popitem");
    INTERN(s_params, "params");
    INTERN(s_grad, "grad");
    INTERN(s_values, "values");
    INTERN(s_get, "get");
#undef INTERN
    if ((zero = PyLong_FromLong(0)) == NULL)
        return NULL;
    if ((empty_tuple = PyTuple_New(0)) == NULL || (popitem_kwargs = PyDict_New()) == NULL
        || PyDict_SetItemString(popitem_kwargs, "last", Py_False) < 0)
        return NULL;
    m = PyModule_Create(&speedups_module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&LaneWriteType);
    if (PyModule_AddObject(m, "LaneWrite", (PyObject *)&LaneWriteType) < 0) {
        Py_DECREF(&LaneWriteType);
        Py_DECREF(m);
        return NULL;
    }
    if (PyModule_AddIntConstant(m, "VERSION", 5) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}


/* ---- speeds19: a counted line's calls (NOTE [A counted line's calls, compiled] in
 * tensorscope/instrument/speedups.py) ------------------------------------------------------------------------
 *
 * counted_call(orig, fallback, record, failed, state, paused, modes, lines, op, alias, count, aggregated) makes a
 * CountedCall: the body of an alias, copy or creation wrapper made by calls.after_call(..., counted=True). Called
 * with the program's arguments it does what the Python body `call` does:
 * - no recorder, an inactive one or a paused thread (`paused` not empty): `fallback(*args, **kwargs)`, the Python
 *   body itself, which tests again and calls `orig`;
 * - else it calls `orig`; an exception of `orig` is handed to `failed(rec, e, args, kwargs, frame)` (the failure
 *   recorded, tensorscope's frames taken out of its traceback) and goes on to the program as it is;
 * - a call from an instruction remembered in `lines` with the same code, recorder, types and no torch-function
 *   mode (the Python body's hit) is counted here: `count(rec.site_counts, (site,))`,
 *   `count(rec.aggregated_counts, aggregated)`, and for an alias `rec.kept.on_alias(rec, op, src, (out,), frame, site)`,
 *   an Exception of any of them dropped as the Python `try: ... except Exception: pass` does (the site, whose file
 *   and line are the call's, is handed to on_alias as its last argument, as the Python body hands it);
 * - anything else goes to `record(rec, args, kwargs, out, frame)`, the Python body's code after `orig` returned.
 * It has no Python frame: `frame` is the interpreter's current one, the program's (what `sys._getframe(1)` is in
 * the Python body, called with no frame of this object's between). */

typedef struct {
    PyObject_HEAD
    PyObject *orig, *fallback, *record, *failed, *state, *paused, *modes, *lines, *op, *count, *aggregated;
    int alias;
    Py_ssize_t hits; /* the calls counted here (for the tests) */
} CountedCall;

static PyObject *cc_s_recorder, *cc_s_active, *cc_s_user, *cc_s_verdict, *cc_s_site_counts, *cc_s_aggregated,
    *cc_s_kept, *cc_s_on_alias, *cc_s_input, *cc_s_self, *cc_s_f_lasti, *cc_one;
static int cc_ready = 0;

static int
cc_traverse(CountedCall *self, visitproc visit, void *arg)
{
    Py_VISIT(self->orig);
    Py_VISIT(self->fallback);
    Py_VISIT(self->record);
    Py_VISIT(self->failed);
    Py_VISIT(self->state);
    Py_VISIT(self->paused);
    Py_VISIT(self->modes);
    Py_VISIT(self->lines);
    Py_VISIT(self->op);
    Py_VISIT(self->count);
    Py_VISIT(self->aggregated);
    return 0;
}

static int
cc_clear(CountedCall *self)
{
    Py_CLEAR(self->orig);
    Py_CLEAR(self->fallback);
    Py_CLEAR(self->record);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->state);
    Py_CLEAR(self->paused);
    Py_CLEAR(self->modes);
    Py_CLEAR(self->lines);
    Py_CLEAR(self->op);
    Py_CLEAR(self->count);
    Py_CLEAR(self->aggregated);
    return 0;
}

static void
cc_dealloc(CountedCall *self)
{
    PyObject_GC_UnTrack(self);
    cc_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* count(counts, keys) for a tuple of one key, as collections._count_elements does on an exact dict (it holds the
 * GIL throughout, so no other thread's count can come in between); any other mapping through `count` itself. */
/* speedc21: one key's count in an exact dict, its hash computed once (the look-up and the store take it where
 * the Python version has the known-hash calls in its C API, 3.10 to 3.12; 3.13 keeps the store internal) */
static int
cc_count_key(PyObject *counts, PyObject *key)
{
    PyObject *old, *new;
    int rc;
#if PY_VERSION_HEX < 0x030D0000
    Py_hash_t hash = PyObject_Hash(key);
    if (hash == -1)
        return -1;
    old = _PyDict_GetItem_KnownHash(counts, key, hash);
#else
    old = PyDict_GetItemWithError(counts, key);
#endif
    if (old == NULL) {
        if (PyErr_Occurred())
            return -1;
        new = PyLong_FromLong(1);
    } else {
        new = PyNumber_Add(old, cc_one);
    }
    if (new == NULL)
        return -1;
#if PY_VERSION_HEX < 0x030D0000
    rc = _PyDict_SetItem_KnownHash(counts, key, new, hash);
#else
    rc = PyDict_SetItem(counts, key, new);
#endif
    Py_DECREF(new);
    return rc;
}

static int
cc_count(CountedCall *self, PyObject *counts, PyObject *keys)
{
    if (PyDict_CheckExact(counts) && PyTuple_CheckExact(keys) && PyTuple_GET_SIZE(keys) == 1)
        return cc_count_key(counts, PyTuple_GET_ITEM(keys, 0));
    PyObject *r = PyObject_CallFunctionObjArgs(self->count, counts, keys, NULL);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

/* The hit's count and the alias offered to the kept values; 0, or -1 with an exception that is not an Exception */
static int
cc_counted(CountedCall *self, PyObject *rec, PyObject *site, PyObject *src, PyObject *out, PyObject *frame)
{
    PyObject *counts = NULL, *keys = NULL, *kept = NULL, *outs = NULL, *r = NULL;
    int rc = -1;
    counts = PyObject_GetAttr(rec, cc_s_site_counts);
    if (counts == NULL)
        goto done;
    if (PyDict_CheckExact(counts)) { /* speedc21: no `(site,)` tuple made for an exact dict's count */
        if (cc_count_key(counts, site) < 0)
            goto done;
    } else if ((keys = PyTuple_Pack(1, site)) == NULL || cc_count(self, counts, keys) < 0) {
        goto done;
    }
    Py_CLEAR(counts);
    counts = PyObject_GetAttr(rec, cc_s_aggregated);
    if (counts == NULL || cc_count(self, counts, self->aggregated) < 0)
        goto done;
    if (self->alias) {
        kept = PyObject_GetAttr(rec, cc_s_kept);
        if (kept == NULL || (outs = PyTuple_Pack(1, out)) == NULL)
            goto done;
        /* callargs[0] is free for the callee (PY_VECTORCALL_ARGUMENTS_OFFSET: it may set args[-1] for a while) */
        PyObject *callargs[8] = {NULL, kept, rec, self->op, src, outs, frame, site};
        r = PyObject_VectorcallMethod(cc_s_on_alias, callargs + 1, 7 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r == NULL)
            goto done;
    }
    rc = 0;
done:
    if (rc < 0 && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        rc = 0;
    }
    Py_XDECREF(counts);
    Py_XDECREF(keys);
    Py_XDECREF(kept);
    Py_XDECREF(outs);
    Py_XDECREF(r);
    return rc;
}

/* 1: the call is a remembered hit (site set, borrowed from `lines`' entry, which the caller keeps alive by its
 * reference to `hit`); 0: not one; -1: an error. */
static int
cc_hit(CountedCall *self, PyObject *rec, PyObject *src, PyObject *out, PyObject *frame, PyObject **hitp)
{
    PyObject *n, *code = NULL, *user = NULL, *verdicts = NULL, *verdict, *lasti = NULL, *hit, *who = NULL;
    int rc = -1, truth;
    PyTypeObject *made = Py_TYPE(out);
    *hitp = NULL;
    if (made == &PyTuple_Type || made == &PyList_Type || out == src)
        return 0;
    n = PyObject_CallNoArgs(self->modes); /* a torch-function mode: the Python body records under tf_off */
    if (n == NULL)
        return -1;
    truth = PyObject_IsTrue(n);
    Py_DECREF(n);
    if (truth != 0)
        return truth < 0 ? -1 : 0;
    code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    user = PyObject_GetAttr(rec, cc_s_user);
    if (user == NULL)
        goto done;
    verdicts = PyObject_GetAttr(user, cc_s_verdict);
    if (verdicts == NULL || !PyDict_Check(verdicts)) {
        rc = verdicts == NULL ? -1 : 0;
        goto done;
    }
    verdict = PyDict_GetItemWithError(verdicts, ((PyCodeObject *)code)->co_filename);
    if (verdict != Py_True) { /* not known to be the program's: the Python body decides */
        rc = verdict == NULL && PyErr_Occurred() ? -1 : 0;
        goto done;
    }
#if PY_VERSION_HEX >= 0x030B0000
    lasti = PyLong_FromLong(PyFrame_GetLasti((PyFrameObject *)frame)); /* frame.f_lasti */
#else
    lasti = PyObject_GetAttr(frame, cc_s_f_lasti);
#endif
    if (lasti == NULL)
        goto done;
    hit = PyDict_GetItemWithError(self->lines, lasti);
    if (hit == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    if (!PyTuple_CheckExact(hit) || PyTuple_GET_SIZE(hit) != 5 || PyTuple_GET_ITEM(hit, 0) != code
        || PyTuple_GET_ITEM(hit, 2) != (PyObject *)Py_TYPE(src) || PyTuple_GET_ITEM(hit, 3) != (PyObject *)made) {
        rc = 0;
        goto done;
    }
    who = PyObject_CallNoArgs(PyTuple_GET_ITEM(hit, 1)); /* the recorder's weak reference */
    if (who == NULL)
        goto done;
    if (who != rec) {
        rc = 0;
        goto done;
    }
    Py_INCREF(hit);
    *hitp = hit;
    rc = 1;
done:
    Py_XDECREF(code);
    Py_XDECREF(user);
    Py_XDECREF(verdicts);
    Py_XDECREF(lasti);
    Py_XDECREF(who);
    return rc;
}

static PyObject *
cc_call(CountedCall *self, PyObject *args, PyObject *kwargs)
{
    PyObject *rec, *out, *src = NULL, *hit = NULL;
    PyObject *frame;
    int truth;
    if (PyDict_GET_SIZE(self->paused))
        return PyObject_Call(self->fallback, args, kwargs);
    rec = PyObject_GetAttr(self->state, cc_s_recorder);
    if (rec == NULL)
        return NULL;
    if (rec == Py_None) {
        Py_DECREF(rec);
        return PyObject_Call(self->fallback, args, kwargs);
    }
    PyObject *active = PyObject_GetAttr(rec, cc_s_active);
    truth = active == NULL ? -1 : PyObject_IsTrue(active);
    Py_XDECREF(active);
    if (truth <= 0) {
        Py_DECREF(rec);
        if (truth < 0) {
            PyErr_Clear(); /* the Python body reads it again, and raises what it raises */
        }
        return PyObject_Call(self->fallback, args, kwargs);
    }
    frame = (PyObject *)PyEval_GetFrame(); /* borrowed: the caller's (this wrapper has no frame) */
    if (frame == NULL) {
        Py_DECREF(rec);
        return PyObject_Call(self->fallback, args, kwargs);
    }
    Py_INCREF(frame);
    out = PyObject_Call(self->orig, args, kwargs);
    if (out == NULL) { /* the op's exception: recorded (failed), then on to the program */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb != NULL && value != NULL)
            PyException_SetTraceback(value, tb);
        if (value != NULL) {
            PyObject *r = PyObject_CallFunctionObjArgs(self->failed, rec, value, args,
                                                       kwargs != NULL ? kwargs : Py_None, frame, NULL);
            if (r == NULL)
                PyErr_Clear(); /* the program's exception goes on, not ours */
            Py_XDECREF(r);
            Py_XDECREF(tb);
            tb = PyException_GetTraceback(value); /* as `failed` left it */
        }
        PyErr_Restore(type, value, tb);
        Py_DECREF(frame);
        Py_DECREF(rec);
        return NULL;
    }
    if (PyTuple_GET_SIZE(args) > 0) {
        src = PyTuple_GET_ITEM(args, 0);
    } else if (kwargs != NULL) { /* kwargs.get("input", kwargs.get("self")) */
        src = PyDict_GetItemWithError(kwargs, cc_s_input);
        if (src == NULL && !PyErr_Occurred())
            src = PyDict_GetItemWithError(kwargs, cc_s_self);
        if (src == NULL && PyErr_Occurred())
            goto error;
    }
    if (src == NULL)
        src = Py_None;
    Py_INCREF(src);
    truth = cc_hit(self, rec, src, out, frame, &hit);
    if (truth < 0)
        goto error;
    if (truth) {
        self->hits++;
        truth = cc_counted(self, rec, PyTuple_GET_ITEM(hit, 4), src, out, frame);
        Py_DECREF(hit);
        if (truth < 0)
            goto error;
    } else {
        PyObject *r = PyObject_CallFunctionObjArgs(self->record, rec, args, kwargs != NULL ? kwargs : Py_None, out,
                                                   frame, NULL);
        if (r == NULL)
            goto error;
        Py_DECREF(r);
    }
    Py_DECREF(src);
    Py_DECREF(frame);
    Py_DECREF(rec);
    return out;
error:
    Py_XDECREF(src);
    Py_DECREF(frame);
    Py_DECREF(rec);
    Py_DECREF(out);
    return NULL;
}

static PyObject *
cc_get_hits(CountedCall *self, void *closure)
{
    return PyLong_FromSsize_t(self->hits);
}

static PyObject *
cc_get_fallback(CountedCall *self, void *closure)
{
    Py_INCREF(self->fallback);
    return self->fallback;
}

static PyGetSetDef cc_getset[] = {
    {"hits", (getter)cc_get_hits, NULL, "the calls counted here", NULL},
    {"fallback", (getter)cc_get_fallback, NULL, "the pure-Python body", NULL},
    {NULL}
};

static PyTypeObject CountedCallType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tensorscope._speedups.CountedCall",
    .tp_basicsize = sizeof(CountedCall),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A counted line's call wrapper body (see tensorscope/instrument/speedups.py).",
    .tp_dealloc = (destructor)cc_dealloc,
    .tp_traverse = (traverseproc)cc_traverse,
    .tp_clear = (inquiry)cc_clear,
    .tp_call = (ternaryfunc)cc_call,
    .tp_getset = cc_getset,
};

static PyObject *
counted_call(PyObject *module, PyObject *args)
{
    PyObject *orig, *fallback, *record, *failed, *state, *paused, *modes, *lines, *op, *count, *aggregated;
    int alias;
    if (!cc_ready) {
        if (PyType_Ready(&CountedCallType) < 0)
            return NULL;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
        INTERN(cc_s_recorder, "recorder");
        INTERN(cc_s_active, "active");
        INTERN(cc_s_user, "user");
        INTERN(cc_s_verdict, "_verdict");
        INTERN(cc_s_site_counts, "site_counts");
        INTERN(cc_s_aggregated, "aggregated_counts");
        INTERN(cc_s_kept, "kept");
        INTERN(cc_s_on_alias, "on_alias");
        INTERN(cc_s_input, "input");
        INTERN(cc_s_self, "self");
        INTERN(cc_s_f_lasti, "f_lasti");
#undef INTERN
        if ((cc_one = PyLong_FromLong(1)) == NULL)
            return NULL;
        cc_ready = 1;
    }
    if (!PyArg_ParseTuple(args, "OOOOOO!OO!OpOO!:counted_call", &orig, &fallback, &record, &failed, &state,
                          &PyDict_Type, &paused, &modes, &PyDict_Type, &lines, &op, &alias, &count,
                          &PyTuple_Type, &aggregated))
        return NULL;
    CountedCall *self = PyObject_GC_New(CountedCall, &CountedCallType);
    if (self == NULL)
        return NULL;
    PyObject **fields[] = {&self->orig, &self->fallback, &self->record, &self->failed, &self->state, &self->paused,
                           &self->modes, &self->lines, &self->op, &self->count, &self->aggregated};
    PyObject *values[] = {orig, fallback, record, failed, state, paused, modes, lines, op, count, aggregated};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        Py_INCREF(values[i]);
        *fields[i] = values[i];
    }
    self->alias = alias;
    self->hits = 0;
    PyObject_GC_Track(self);
    return (PyObject *)self;
}
/* ---- end of speeds19's block ---- */

/* ---- speedn19: the parameters' finite check after an optimizer step (NOTE [A step's parameters read in place] in
 * tensorscope/instrument/nonfinite.py) ---------------------------------------------------------------------------
 *
 * finite_params(param_groups, inspectable, to_dlpack) -> an int, False or None. An int: every floating parameter of
 * every group is a CPU tensor whose values are all finite, and there are that many (0: none); False: one of them holds a NaN or an infinity; None: it
 * cannot be told here (a parameter of a type `inspectable` does not map to True, a group that is not a dict whose
 * "params" is a list, `to_dlpack` raising or giving what is not read here: another device, a dtype or layout not
 * known, no data), and the caller's Python check decides. `to_dlpack` is torch._C._to_dlpack: one C call gives
 * the tensor's data pointer, device, dtype, shape and strides (DLPack's DLManagedTensor, a stable C ABI) and keeps
 * the storage alive until the capsule is released (its destructor calls the producer's deleter, the capsule not
 * being consumed). Values are read with the GIL held, as they are: a value is not finite when its exponent bits
 * are all set (IEEE 754 binary16/32/64 and bfloat16; complex: each part). Integer and bool tensors are skipped as
 * `_floating` skips them; every other dtype (float8, ...) gives None. */
#include <stdint.h>
#include <string.h>

typedef struct { int32_t device_type; int32_t device_id; } TsDLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } TsDLDataType;
typedef struct {
    void *data;
    TsDLDevice device;
    int32_t ndim;
    TsDLDataType dtype;
    int64_t *shape;
    int64_t *strides;
    uint64_t byte_offset;
} TsDLTensor;
typedef struct TsDLManagedTensor {
    TsDLTensor dl_tensor;
    void *manager_ctx;
    void (*deleter)(struct TsDLManagedTensor *self);
} TsDLManagedTensor;

enum { TS_KDLCPU = 1, TS_KDLINT = 0, TS_KDLUINT = 1, TS_KDLFLOAT = 2, TS_KDLBFLOAT = 4, TS_KDLCOMPLEX = 5,
       TS_KDLBOOL = 6 };
#define TS_MAX_DIMS 64

/* whether any of the n components of width `w` bytes (2, 4 or 8) at `p`, `step` bytes apart, has all its exponent
 * bits set under `mask`. Contiguous aligned components are read in blocks through may_alias types (GCC and clang):
 * a loop the compiler vectorises; any other run one component at a time through memcpy. */
#if defined(__GNUC__) || defined(__clang__)
typedef uint16_t __attribute__((may_alias)) ts_u16a;
typedef uint32_t __attribute__((may_alias)) ts_u32a;
typedef uint64_t __attribute__((may_alias)) ts_u64a;
#define TS_BLOCK 4096
#define TS_BLOCKS(T, M)                                                                                  \
    do {                                                                                                 \
        const T *q = (const T *)p;                                                                       \
        const T m_ = (T)(M);                                                                             \
        int64_t at = 0;                                                                                  \
        while (at < n) {                                                                                 \
            int64_t end = n - at < TS_BLOCK ? n : at + TS_BLOCK;                                         \
            uint32_t cnt = 0;                                                                            \
            for (i = at; i < end; i++)                                                                   \
                cnt += (uint32_t)((T)(q[i] & m_) == m_);                                                 \
            if (cnt)                                                                                     \
                return 1;                                                                                \
            at = end;                                                                                    \
        }                                                                                                \
        return 0;                                                                                        \
    } while (0)
#endif

static int
ts_any_nonfinite(const char *p, int64_t n, int64_t step, int w, uint64_t mask)
{
    int64_t i;
#ifdef TS_BLOCK
    if (step == w && ((uintptr_t)p % (uintptr_t)w) == 0) {
        if (w == 4)
            TS_BLOCKS(ts_u32a, mask);
        if (w == 2)
            TS_BLOCKS(ts_u16a, mask);
        if (w == 8)
            TS_BLOCKS(ts_u64a, mask);
    }
#endif
    if (w == 4) {
        uint32_t m = (uint32_t)mask, bad = 0, x;
        for (i = 0; i < n; i++) {
            memcpy(&x, p + step * i, 4);
            bad |= (uint32_t)((x & m) == m);
        }
        return bad != 0;
    }
    if (w == 2) {
        uint16_t m = (uint16_t)mask, x;
        uint32_t bad = 0;
        for (i = 0; i < n; i++) {
            memcpy(&x, p + step * i, 2);
            bad |= (uint32_t)((uint16_t)(x & m) == m);
        }
        return bad != 0;
    }
    {
        uint64_t x;
        uint32_t bad = 0;
        for (i = 0; i < n; i++) {
            memcpy(&x, p + step * i, 8);
            bad |= (uint32_t)((x & mask) == mask);
        }
        return bad != 0;
    }
}

/* 1: a value not finite, 2: floating and all finite, 0: not floating (not read), -1: not read here */
static int
ts_tensor_nonfinite(const TsDLTensor *t)
{
    int w, parts, d, nd = t->ndim;
    uint64_t mask;
    int64_t numel = 1, idx[TS_MAX_DIMS];
    const char *base;
    if (t->dtype.lanes != 1)
        return -1;
    switch (t->dtype.code) {
    case TS_KDLINT: case TS_KDLUINT: case TS_KDLBOOL:
        return 0; /* not floating: never checked */
    case TS_KDLFLOAT: parts = 1; break;
    case TS_KDLBFLOAT: parts = 1; break;
    case TS_KDLCOMPLEX: parts = 2; break;
    default: return -1;
    }
    if (t->device.device_type != TS_KDLCPU)
        return -1;
    if (t->dtype.bits % parts)
        return -1;
    w = t->dtype.bits / parts / 8;
    if (t->dtype.code == TS_KDLBFLOAT)
        mask = t->dtype.bits == 16 ? 0x7f80u : 0;
    else if (w == 2)
        mask = 0x7c00u;
    else if (w == 4)
        mask = 0x7f800000u;
    else if (w == 8)
        mask = 0x7ff0000000000000ull;
    else
        mask = 0;
    if (mask == 0 || nd < 0 || nd > TS_MAX_DIMS || (nd > 0 && t->shape == NULL))
        return -1;
    for (d = 0; d < nd; d++) {
        if (t->shape[d] < 0)
            return -1;
        numel *= t->shape[d];
    }
    if (numel == 0)
        return 2;
    if (t->data == NULL)
        return -1;
    base = (const char *)t->data + t->byte_offset;
    {   /* compact row-major (strides absent, or those of a contiguous tensor, size-1 dimensions aside): one run */
        int compact = 1;
        int64_t expect = 1;
        if (t->strides != NULL) {
            for (d = nd - 1; d >= 0; d--) {
                if (t->shape[d] != 1 && t->strides[d] != expect) {
                    compact = 0;
                    break;
                }
                expect *= t->shape[d];
            }
        }
        if (compact)
            return ts_any_nonfinite(base, numel * parts, w, w, mask) ? 1 : 2;
    }
    /* any other strides: the innermost dimension a run, the others stepped through (an odometer) */
    for (d = 0; d < nd; d++) {
        if (t->strides[d] < 0)
            return -1;
        idx[d] = 0;
    }
    {
        int64_t inner = nd > 0 ? t->shape[nd - 1] : 1, istep = nd > 0 ? t->strides[nd - 1] : 1;
        int64_t esize = (int64_t)w * parts;
        for (;;) {
            int64_t off = 0;
            for (d = 0; d < nd - 1; d++)
                off += idx[d] * t->strides[d];
            if (parts == 1) {
                if (ts_any_nonfinite(base + off * esize, inner, istep * esize, w, mask))
                    return 1;
            } else {
                if (ts_any_nonfinite(base + off * esize, inner, istep * esize, w, mask)
                    || ts_any_nonfinite(base + off * esize + w, inner, istep * esize, w, mask))
                    return 1;
            }
            for (d = nd - 2; d >= 0; d--) {
                if (++idx[d] < t->shape[d])
                    break;
                idx[d] = 0;
            }
            if (d < 0)
                return 2;
        }
    }
}

static PyObject *s_params;

static PyObject *
finite_params(PyObject *module, PyObject *args)
{
    PyObject *groups, *inspectable, *to_dlpack;
    Py_ssize_t i, j;
    int found_bad = 0;
    Py_ssize_t floating = 0;
    if (!PyArg_ParseTuple(args, "OO!O:finite_params", &groups, &PyDict_Type, &inspectable, &to_dlpack))
        return NULL;
    if (s_params == NULL && (s_params = PyUnicode_InternFromString("params")) == NULL)
        return NULL;
    if (!PyList_Check(groups))
        Py_RETURN_NONE;
    Py_INCREF(groups);
    for (i = 0; i < PyList_GET_SIZE(groups); i++) {
        PyObject *g = PyList_GET_ITEM(groups, i), *params;
        if (!PyDict_CheckExact(g))
            goto unknown;
        params = PyDict_GetItemWithError(g, s_params);
        if (params == NULL || !PyList_Check(params)) {
            PyErr_Clear();
            goto unknown;
        }
        Py_INCREF(params);
        for (j = 0; j < PyList_GET_SIZE(params); j++) {
            PyObject *p = PyList_GET_ITEM(params, j), *known, *cap;
            TsDLManagedTensor *m;
            int r;
            known = PyDict_GetItemWithError(inspectable, (PyObject *)Py_TYPE(p));
            if (known != Py_True) {
                PyErr_Clear();
                Py_DECREF(params);
                goto unknown;
            }
            Py_INCREF(p);
            cap = PyObject_CallOneArg(to_dlpack, p);
            Py_DECREF(p);
            if (cap == NULL || !PyCapsule_IsValid(cap, "dltensor")) {
                PyErr_Clear();
                Py_XDECREF(cap);
                Py_DECREF(params);
                goto unknown;
            }
            m = (TsDLManagedTensor *)PyCapsule_GetPointer(cap, "dltensor");
            r = m == NULL ? -1 : ts_tensor_nonfinite(&m->dl_tensor);
            Py_DECREF(cap); /* not consumed: its destructor calls the deleter, which lets the tensor go */
            if (r < 0) {
                PyErr_Clear();
                Py_DECREF(params);
                goto unknown;
            }
            if (r == 2)
                floating++;
            else if (r == 1)
                found_bad = 1; /* read on: a later parameter on another device still makes the answer None */
        }
        Py_DECREF(params);
    }
    Py_DECREF(groups);
    if (found_bad)
        Py_RETURN_FALSE;
    return PyLong_FromSsize_t(floating);
unknown:
    Py_DECREF(groups);
    Py_RETURN_NONE;
}

/* ---- speedv20: KeptValues.on_alias in C (NOTE [A counted view offered to the kept values, compiled] in
 * tensorscope/instrument/kept.py) -----------------------------------------------------------------------------
 *
 * kept_on_alias(cls, fallback, tensor_type, keeping, max_young) -> a method descriptor of `cls` (a subclass of
 * KeptValues) whose body is KeptValues.on_alias's, read for read in the same order: `op in keeping`, else
 * `isinstance(base, tensor_type)` and `base.grad_fn is None` (an exception of these goes out, as it does from the
 * Python body, whose test is outside its `try`), `self.young`, then inside the `try` (an Exception cleared, any
 * other going out) the source's weak reference, each tensor of `outs` appended to `young` as the tuple
 * (weakref(out), op, file, line, src, out._version, op != "data"), and `self.settle(rec)` at `max_young`. Only the
 * call with the site (the counted line's: `site[1]` and `site[2]` are the frame's file and line) and positional
 * arguments is done here; any other goes to `fallback` (the Python function) with the same arguments. */
static PyObject *kv_fallback, *kv_tensor, *kv_keeping, *kv_s_young, *kv_s_grad_fn, *kv_s_data, *kv_s_settle,
    *kv_s_append;
static Py_ssize_t kv_max_young;

static PyObject *
kv_call_fallback(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nkw = kwnames != NULL ? PyTuple_GET_SIZE(kwnames) : 0, i;
    PyObject *small[16], **stack = small, *r;
    if (nargs + nkw + 1 > 16) {
        stack = PyMem_Malloc((size_t)(nargs + nkw + 1) * sizeof(PyObject *));
        if (stack == NULL)
            return PyErr_NoMemory();
    }
    stack[0] = self;
    for (i = 0; i < nargs + nkw; i++)
        stack[i + 1] = args[i];
    r = PyObject_Vectorcall(kv_fallback, stack, (size_t)(nargs + 1), kwnames);
    if (stack != small)
        PyMem_Free(stack);
    return r;
}

/* young.append(item) */
static int
kv_append(PyObject *young, PyObject *item)
{
    if (PyList_CheckExact(young))
        return PyList_Append(young, item);
    PyObject *r = PyObject_CallMethodOneArg(young, kv_s_append, item);
    if (r == NULL)
        return -1;
    Py_DECREF(r);
    return 0;
}

static PyObject *
kv_on_alias(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    PyObject *rec, *op, *base, *outs, *site, *young = NULL, *src = NULL, *it = NULL, *out = NULL;
    PyObject *shares = NULL;
    int keeping, is_tensor = -1;
    if (kv_fallback == NULL || nargs != 6 || (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0)
        || !PyTuple_Check(args[5]) || PyTuple_GET_SIZE(args[5]) < 3)
        return kv_call_fallback(self, args, nargs, kwnames);
    rec = args[0];
    op = args[1];
    base = args[2];
    outs = args[3];
    site = args[5];
    keeping = PySequence_Contains(kv_keeping, op); /* `op not in _KEEPING` */
    if (keeping < 0)
        return NULL;
    if (!keeping) {
        is_tensor = PyObject_IsInstance(base, kv_tensor);
        if (is_tensor < 0)
            return NULL;
        if (!is_tensor)
            Py_RETURN_NONE;
        PyObject *gf = PyObject_GetAttr(base, kv_s_grad_fn);
        if (gf == NULL)
            return NULL;
        int none = gf == Py_None;
        Py_DECREF(gf);
        if (!none)
            Py_RETURN_NONE;
    }
    young = PyObject_GetAttr(self, kv_s_young);
    if (young == NULL)
        return NULL;
    /* try: */
    is_tensor = PyObject_IsInstance(base, kv_tensor);
    if (is_tensor < 0)
        goto except;
    if (is_tensor) {
        if ((src = PyWeakref_NewRef(base, NULL)) == NULL)
            goto except;
    } else {
        Py_INCREF(Py_None);
        src = Py_None;
    }
    PyObject *file = PyTuple_GET_ITEM(site, 1), *line = PyTuple_GET_ITEM(site, 2);
    if ((it = PyObject_GetIter(outs)) == NULL)
        goto except;
    while ((out = PyIter_Next(it)) != NULL) {
        int t = PyObject_IsInstance(out, kv_tensor);
        if (t < 0)
            goto except;
        if (t) {
            PyObject *ref = NULL, *version = NULL, *item = NULL;
            int rc = -1;
            if ((ref = PyWeakref_NewRef(out, NULL)) != NULL && (version = PyObject_GetAttr(out, s_version)) != NULL
                && (shares = PyObject_RichCompare(op, kv_s_data, Py_NE)) != NULL
                && (item = PyTuple_Pack(7, ref, op, file, line, src, version, shares)) != NULL)
                rc = kv_append(young, item);
            Py_XDECREF(ref);
            Py_XDECREF(version);
            Py_CLEAR(shares);
            Py_XDECREF(item);
            if (rc < 0)
                goto except;
        }
        Py_CLEAR(out);
    }
    if (PyErr_Occurred())
        goto except;
    Py_CLEAR(it);
    {
        Py_ssize_t n = PyObject_Size(young);
        if (n < 0)
            goto except;
        if (n >= kv_max_young) {
            PyObject *r = PyObject_CallMethodOneArg(self, kv_s_settle, rec);
            if (r == NULL)
                goto except;
            Py_DECREF(r);
        }
    }
    Py_DECREF(young);
    Py_DECREF(src);
    Py_RETURN_NONE;
except: /* `except Exception: pass` */
    Py_XDECREF(out);
    Py_XDECREF(it);
    Py_XDECREF(src);
    Py_DECREF(young);
    if (PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return NULL;
}

static PyMethodDef kv_on_alias_def = {
    "on_alias", (PyCFunction)(void (*)(void))kv_on_alias, METH_FASTCALL | METH_KEYWORDS,
    "KeptValues.on_alias in C (see tensorscope/instrument/kept.py)."
};

static PyObject *
kept_on_alias(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    Py_ssize_t max_young;
    if (nargs != 5 || !PyType_Check(args[0]) || !PyAnySet_Check(args[3])) {
        PyErr_SetString(PyExc_TypeError, "kept_on_alias(cls, fallback, tensor_type, keeping, max_young)");
        return NULL;
    }
    max_young = PyLong_AsSsize_t(args[4]);
    if (max_young == -1 && PyErr_Occurred())
        return NULL;
#define INTERN(var, text) if (var == NULL && (var = PyUnicode_InternFromString(text)) == NULL) return NULL
    INTERN(kv_s_young, "young");
    INTERN(kv_s_grad_fn, "grad_fn");
    INTERN(kv_s_data, "data");
    INTERN(kv_s_settle, "settle");
    INTERN(kv_s_append, "append");
#undef INTERN
    Py_INCREF(args[1]);
    Py_XSETREF(kv_fallback, args[1]);
    Py_INCREF(args[2]);
    Py_XSETREF(kv_tensor, args[2]);
    Py_INCREF(args[3]);
    Py_XSETREF(kv_keeping, args[3]);
    kv_max_young = max_young;
    return PyDescr_NewMethod((PyTypeObject *)args[0], &kv_on_alias_def);
}
/* finite_scalar(t, tensor_type, kinds, reads) -> True or None: ValueWatch.before_backward's loss check (NOTE [The
 * loss read in place] in tensorscope/instrument/nonfinite.py). `reads` is TensorBase's own (dtype, is_cpu, numel,
 * data_ptr): a getter, a getter and two methods, called on `t` directly, never through `t`'s class (a program may
 * have replaced torch.Tensor's attributes with wrappers of its own). True: `t` (of exactly `tensor_type`) needs no
 * check, its dtype being one that `_floating` leaves out (`kinds[dtype]` 0), or a CPU tensor of one element whose
 * value, read at its data pointer, is finite (`kinds[dtype]`: 1 float16, 2 bfloat16, 3 float32, 4 float64,
 * 5 complex64, 6 complex128; the exponent bits tested as ts_any_nonfinite tests them). None: anything else
 * (another type, dtype, device or size, no data pointer, a value not finite, a read raising an Exception): the
 * caller's Python check runs as before. */
static PyObject *
ts_get(PyObject *descr, PyObject *t)
{
    descrgetfunc get = Py_TYPE(descr)->tp_descr_get;
    if (get == NULL) {
        PyErr_SetString(PyExc_TypeError, "not a descriptor");
        return NULL;
    }
    return get(descr, t, (PyObject *)Py_TYPE(t));
}

static PyObject *
finite_scalar(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    PyObject *t, *reads, *dtype = NULL, *kind, *r = NULL;
    long k;
    int w, parts = 1;
    uint64_t mask;
    if (nargs != 4 || !PyDict_Check(args[2]) || !PyTuple_Check(args[3]) || PyTuple_GET_SIZE(args[3]) != 4) {
        PyErr_SetString(PyExc_TypeError, "finite_scalar(t, tensor_type, kinds, (dtype, is_cpu, numel, data_ptr))");
        return NULL;
    }
    t = args[0];
    reads = args[3];
    if ((PyObject *)Py_TYPE(t) != args[1])
        Py_RETURN_NONE;
    if ((dtype = ts_get(PyTuple_GET_ITEM(reads, 0), t)) == NULL)
        goto unknown;
    kind = PyDict_GetItemWithError(args[2], dtype);
    Py_CLEAR(dtype);
    if (kind == NULL || !PyLong_Check(kind))
        goto unknown;
    k = PyLong_AsLong(kind);
    switch (k) {
    case 0: Py_RETURN_TRUE; /* not floating: `_floating` leaves it out, nothing is checked */
    case 1: w = 2; mask = 0x7c00u; break;
    case 2: w = 2; mask = 0x7f80u; break;
    case 3: w = 4; mask = 0x7f800000u; break;
    case 4: w = 8; mask = 0x7ff0000000000000ull; break;
    case 5: w = 4; parts = 2; mask = 0x7f800000u; break;
    case 6: w = 8; parts = 2; mask = 0x7ff0000000000000ull; break;
    default: goto unknown;
    }
    if ((r = ts_get(PyTuple_GET_ITEM(reads, 1), t)) == NULL || r != Py_True)
        goto unknown;
    Py_CLEAR(r);
    if ((r = PyObject_CallOneArg(PyTuple_GET_ITEM(reads, 2), t)) == NULL || !PyLong_Check(r) || PyLong_AsLong(r) != 1)
        goto unknown;
    Py_CLEAR(r);
    if ((r = PyObject_CallOneArg(PyTuple_GET_ITEM(reads, 3), t)) == NULL || !PyLong_Check(r))
        goto unknown;
    {
        void *p = PyLong_AsVoidPtr(r);
        Py_CLEAR(r);
        if (p == NULL)
            goto unknown;
        if (ts_any_nonfinite((const char *)p, parts, w, w, mask))
            goto unknown; /* not finite: the Python check reads it again and records the sink */
    }
    Py_RETURN_TRUE;
unknown:
    Py_XDECREF(dtype);
    Py_XDECREF(r);
    if (PyErr_Occurred()) {
        if (!PyErr_ExceptionMatches(PyExc_Exception))
            return NULL;
        PyErr_Clear();
    }
    Py_RETURN_NONE;
}
/* ---- end of speedv20's block ---- */
/* ---- speedw20: a counted line's in-place writes (NOTE [A counted write, compiled] in
 * tensorscope/instrument/speedups.py) ------------------------------------------------------------------------
 *
 * counted_write(lane, state, in_step, in_write, paused, lines, get_seq, grad_enabled, storage_key, failed,
 * aggregated, running_codes, index_write, max_storages, max_writes) makes a CountedWrite from a LaneWrite `lane`:
 * a LaneWrite (the same fields, the same lane, `hits` and `fallback`) whose call first takes the one case that is
 * a count and a log entry only, what patches.make_write's `write` and Tracker.write_call/write_site do for it:
 * - no step's lane or step (`LANES`, `IN_STEP` empty), no paused thread, no thread inside a write (`IN_WRITE`
 *   empty), an op that is not an index write, a target in args[0] whose type `_INSPECTABLE` maps to True, an
 *   active recorder, no torch-function mode; the target's version and storage key read, no saved tensor of
 *   explain's pending on that storage (`rec.pending`), the caller's file the program's (`rec.user._verdict` True:
 *   the caller's frame is the program's frame), its instruction's line known (`frame_lines._LINES`) and the line's
 *   count of writes already at `rec.per_site` or more (so the write is counted only, not recorded in detail).
 *   Anything else goes to the LaneWrite's call (the lane, else the Python body) before anything is changed, which
 *   then reads it all again;
 * - the site counted (`site_counts`, `aggregated_counts`, as collections._count_elements counts an exact dict),
 *   the thread's ident in `IN_WRITE` while torch's op runs, an exception of the op handed to
 *   `failed(rec, e, op, target, frame)` (Tracker.on_error, tensorscope's frames stripped) and on to the program;
 * - after the op: one dead young kept view let go as write_call lets it go; a young view left, a storage with a
 *   kept alias or a shared state, a running-statistics code or no storage key go to `rec.write_rest(...)`, the
 *   Python tail; else the write log's entry appended here as Tracker.log_write appends it, an Exception in any of
 *   it dropped (write_call's `except Exception: pass`).
 * It has no Python frame: `frame` is the interpreter's current one, the program's. */

typedef struct {
    LaneWrite base;
    PyObject *state, *in_step, *in_write, *paused, *lines, *get_seq, *grad_enabled, *storage_key, *failed,
        *aggregated, *running_codes;
    Py_ssize_t max_storages, max_writes;
    int index_write;
    Py_ssize_t counted; /* the writes counted here (for the tests) */
} CountedWrite;

static PyObject *cw_s_recorder, *cw_s_active, *cw_s_pending, *cw_s_user, *cw_s_verdict, *cw_s_site_counts,
    *cw_s_per_site, *cw_s_aggregated, *cw_s_kept, *cw_s_young, *cw_s_keys, *cw_s_shared, *cw_s_write_rest,
    *cw_s_write_log, *cw_s_write, *cw_s_f_lasti, *cw_one;
static int cw_ready = 0;

static int
cw_traverse(CountedWrite *self, visitproc visit, void *arg)
{
    Py_VISIT(self->state);
    Py_VISIT(self->in_step);
    Py_VISIT(self->in_write);
    Py_VISIT(self->paused);
    Py_VISIT(self->lines);
    Py_VISIT(self->get_seq);
    Py_VISIT(self->grad_enabled);
    Py_VISIT(self->storage_key);
    Py_VISIT(self->failed);
    Py_VISIT(self->aggregated);
    Py_VISIT(self->running_codes);
    return lw_traverse((LaneWrite *)self, visit, arg);
}

static int
cw_clear(CountedWrite *self)
{
    Py_CLEAR(self->state);
    Py_CLEAR(self->in_step);
    Py_CLEAR(self->in_write);
    Py_CLEAR(self->paused);
    Py_CLEAR(self->lines);
    Py_CLEAR(self->get_seq);
    Py_CLEAR(self->grad_enabled);
    Py_CLEAR(self->storage_key);
    Py_CLEAR(self->failed);
    Py_CLEAR(self->aggregated);
    Py_CLEAR(self->running_codes);
    return lw_clear((LaneWrite *)self);
}

static void
cw_dealloc(CountedWrite *self)
{
    PyObject_GC_UnTrack(self);
    cw_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* counts[key] += 1 on an exact dict (as _count_elements does); -1 with an exception */
static int
cw_count(PyObject *counts, PyObject *key)
{
    PyObject *old, *new;
    int rc;
    if (!PyDict_CheckExact(counts)) {
        PyErr_SetString(PyExc_TypeError, "counts: not a dict");
        return -1;
    }
    old = PyDict_GetItemWithError(counts, key);
    if (old == NULL) {
        if (PyErr_Occurred())
            return -1;
        new = PyLong_FromLong(1);
    } else {
        new = PyNumber_Add(old, cw_one);
    }
    if (new == NULL)
        return -1;
    rc = PyDict_SetItem(counts, key, new);
    Py_DECREF(new);
    return rc;
}

/* Tracker.log_write(key, entry) on the tracker's write log (an OrderedDict); -1 with an exception */
static int
cw_log(CountedWrite *self, PyObject *rec, PyObject *key, PyObject *entry)
{
    PyObject *log, *recs, *r;
    int rc = -1;
    log = PyObject_GetAttr(rec, cw_s_write_log);
    if (log == NULL)
        return -1;
    if (!PyDict_Check(log)) {
        PyErr_SetString(PyExc_TypeError, "write_log: not a dict");
        goto done;
    }
    recs = PyDict_GetItemWithError(log, key);
    if (recs == NULL) {
        if (PyErr_Occurred())
            goto done;
        if (PyDict_GET_SIZE(log) >= self->max_storages) { /* log.popitem(last=False) */
            r = PyObject_GetAttr(log, s_popitem);
            if (r == NULL)
                goto done;
            PyObject *popped = PyObject_Call(r, empty_tuple, popitem_kwargs);
            Py_DECREF(r);
            if (popped == NULL)
                goto done;
            Py_DECREF(popped);
        }
        recs = PyList_New(0);
        if (recs == NULL)
            goto done;
        if (PyObject_SetItem(log, key, recs) < 0) {
            Py_DECREF(recs);
            goto done;
        }
    } else {
        Py_INCREF(recs);
        r = PyObject_CallMethodOneArg(log, s_move_to_end, key);
        if (r == NULL) {
            Py_DECREF(recs);
            goto done;
        }
        Py_DECREF(r);
    }
    if (!PyList_CheckExact(recs)) {
        PyErr_SetString(PyExc_TypeError, "write_log: a storage's entries are a list");
        Py_DECREF(recs);
        goto done;
    }
    Py_ssize_t size = PyList_GET_SIZE(recs);
    if (size >= self->max_writes && size > 0) { /* `del recs[0]; recs.append(entry)` as one shift in place */
        PyObject **items = ((PyListObject *)recs)->ob_item, *oldest = items[0];
        memmove(items, items + 1, (size_t)(size - 1) * sizeof(PyObject *));
        Py_INCREF(entry);
        items[size - 1] = entry;
        Py_DECREF(oldest);
        rc = 0;
    } else {
        rc = PyList_Append(recs, entry);
    }
    Py_DECREF(recs);
done:
    Py_DECREF(log);
    return rc;
}

/* 1: the key is in container (a set or a dict: `key in container`), 0: not, -1: an error */
static int
cw_in(PyObject *owner, PyObject *name, PyObject *key)
{
    PyObject *c = PyObject_GetAttr(owner, name);
    int rc;
    if (c == NULL)
        return -1;
    rc = PySequence_Contains(c, key);
    Py_DECREF(c);
    return rc;
}

/* After the op: the tail of Tracker.write_call for a write counted only. 0, or -1 with an exception that is not
 * an Exception (left set). */
static int
cw_after(CountedWrite *self, PyObject *rec, PyObject *args, PyObject *target, PyObject *frame, PyObject *code,
         PyObject *lasti, PyObject *v0, PyObject *key, PyObject *aseq, PyObject *line)
{
    PyObject *kept = NULL, *young = NULL, *shared = NULL, *ident = NULL, *v1 = NULL, *ge = NULL, *entry = NULL;
    PyObject *r = NULL;
    int rc = -1, in, rest = 0;
    kept = PyObject_GetAttr(rec, cw_s_kept);
    if (kept == NULL || (young = PyObject_GetAttr(kept, cw_s_young)) == NULL)
        goto done;
    if (PyList_CheckExact(young) && PyList_GET_SIZE(young) == 1) { /* one young view, dead: let go */
        PyObject *item = PyList_GET_ITEM(young, 0), *wr, *obj;
        if (!PyTuple_Check(item) || PyTuple_GET_SIZE(item) < 1) {
            rest = 1;
        } else {
            Py_INCREF(item);
            wr = PyTuple_GET_ITEM(item, 0);
            obj = PyObject_CallNoArgs(wr);
            Py_DECREF(item);
            if (obj == NULL)
                goto done;
            if (obj == Py_None) {
                PyObject *fresh = PyList_New(0);
                if (fresh == NULL || PyObject_SetAttr(kept, cw_s_young, fresh) < 0) {
                    Py_XDECREF(fresh);
                    Py_DECREF(obj);
                    goto done;
                }
                Py_DECREF(fresh);
            } else {
                rest = 1;
            }
            Py_DECREF(obj);
        }
    } else {
        in = PyObject_IsTrue(young);
        if (in < 0)
            goto done;
        rest = in;
    }
    if (!rest) {
        in = cw_in(kept, cw_s_keys, key);
        if (in < 0)
            goto done;
        rest = in;
    }
    if (!rest) {
        if ((shared = PyObject_GetAttr(rec, cw_s_shared)) == NULL || (in = cw_in(shared, cw_s_keys, key)) < 0)
            goto done;
        rest = in;
    }
    if (!rest) {
        if ((ident = PyLong_FromVoidPtr(code)) == NULL || (in = PySequence_Contains(self->running_codes, ident)) < 0)
            goto done;
        rest = in;
    }
    if (rest) { /* rec.write_rest(target, op, args, frame, v0, key, aseq, uf, line, detailed, mates) */
        PyObject *callargs[13] = {NULL, rec, target, ((LaneWrite *)self)->op, args, frame, v0, key, aseq, frame,
                                  line, Py_False, Py_None};
        r = PyObject_VectorcallMethod(cw_s_write_rest, callargs + 1, 12 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
        if (r == NULL)
            goto done;
        rc = 0;
        goto done;
    }
    if ((v1 = version_read(target, ((LaneWrite *)self)->modes)) == NULL
        || (ge = PyObject_CallNoArgs(self->grad_enabled)) == NULL)
        goto done;
    entry = PyTuple_Pack(10, aseq, v0, v1, ((LaneWrite *)self)->op, ge, code, lasti, line, Py_None, Py_None);
    if (entry == NULL || cw_log(self, rec, key, entry) < 0)
        goto done;
    rc = 0;
done:
    if (rc < 0 && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear();
        rc = 0;
    }
    Py_XDECREF(kept);
    Py_XDECREF(young);
    Py_XDECREF(shared);
    Py_XDECREF(ident);
    Py_XDECREF(v1);
    Py_XDECREF(ge);
    Py_XDECREF(entry);
    Py_XDECREF(r);
    return rc;
}

/* The reads before the op. 1: a counted write (its values set, new references), 0: not one (nothing changed),
 * -1: an error that is not an Exception (left set). */
typedef struct {
    PyObject *v0, *key, *code, *lasti, *line, *site, *counts, *old;
} CwReads;

static void
cw_reads_clear(CwReads *r)
{
    Py_CLEAR(r->v0);
    Py_CLEAR(r->key);
    Py_CLEAR(r->code);
    Py_CLEAR(r->lasti);
    Py_CLEAR(r->line);
    Py_CLEAR(r->site);
    Py_CLEAR(r->counts);
    Py_CLEAR(r->old);
}

static int
cw_reads(CountedWrite *self, PyObject *rec, PyObject *target, PyObject *frame, CwReads *r)
{
    PyObject *pending = NULL, *user = NULL, *verdicts = NULL, *v, *lkey = NULL, *per_site = NULL, *found;
    int rc = -1, ge;
    if ((r->v0 = version_read(target, NULL)) == NULL
        || (r->key = PyObject_CallOneArg(self->storage_key, target)) == NULL)
        goto done;
    if (r->key == Py_None) { /* write_call's `key is None`: the reference path */
        rc = 0;
        goto done;
    }
    if ((pending = PyObject_GetAttr(rec, cw_s_pending)) == NULL)
        goto done;
    if (!PyDict_Check(pending)) {
        rc = 0;
        goto done;
    }
    found = PyDict_GetItemWithError(pending, r->key);
    if (found != NULL && found != Py_None) { /* explain's saved tensors on this storage: the reference path */
        rc = 0;
        goto done;
    }
    if (found == NULL && PyErr_Occurred())
        goto done;
    r->code = (PyObject *)PyFrame_GetCode((PyFrameObject *)frame);
    if ((user = PyObject_GetAttr(rec, cw_s_user)) == NULL || (verdicts = PyObject_GetAttr(user, cw_s_verdict)) == NULL)
        goto done;
    if (!PyDict_CheckExact(verdicts)) {
        rc = 0;
        goto done;
    }
    v = PyDict_GetItemWithError(verdicts, ((PyCodeObject *)r->code)->co_filename);
    if (v != Py_True) { /* not known to be the program's (a library's, torch's, not classified yet): Python walks */
        rc = v == NULL && PyErr_Occurred() ? -1 : 0;
        goto done;
    }
#if PY_VERSION_HEX >= 0x030B0000
    r->lasti = PyLong_FromLong(PyFrame_GetLasti((PyFrameObject *)frame)); /* frame.f_lasti */
#else
    r->lasti = PyObject_GetAttr(frame, cw_s_f_lasti);
#endif
    if (r->lasti == NULL)
        goto done;
    {
        PyObject *ident = PyLong_FromVoidPtr(r->code);
        if (ident == NULL)
            goto done;
        lkey = PyTuple_Pack(2, ident, r->lasti);
        Py_DECREF(ident);
        if (lkey == NULL)
            goto done;
    }
    if (!PyDict_CheckExact(self->lines)) {
        rc = 0;
        goto done;
    }
    r->line = PyDict_GetItemWithError(self->lines, lkey); /* line_of, for a line seen before */
    if (r->line == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    Py_INCREF(r->line);
    if ((r->site = PyTuple_Pack(3, cw_s_write, ((PyCodeObject *)r->code)->co_filename, r->line)) == NULL)
        goto done;
    if ((r->counts = PyObject_GetAttr(rec, cw_s_site_counts)) == NULL)
        goto done;
    if (!PyDict_CheckExact(r->counts)) {
        rc = 0;
        goto done;
    }
    r->old = PyDict_GetItemWithError(r->counts, r->site);
    if (r->old == NULL) {
        rc = PyErr_Occurred() ? -1 : 0;
        goto done;
    }
    Py_INCREF(r->old);
    if ((per_site = PyObject_GetAttr(rec, cw_s_per_site)) == NULL)
        goto done;
    if (!PyLong_CheckExact(r->old) || !PyLong_CheckExact(per_site)) {
        rc = 0;
        goto done;
    }
    ge = PyObject_RichCompareBool(r->old, per_site, Py_GE); /* counted, this one past per_site: counted only */
    if (ge < 0)
        goto done;
    rc = ge;
done:
    if (rc < 0 && PyErr_ExceptionMatches(PyExc_Exception)) {
        PyErr_Clear(); /* the Python body reads it all again, and decides */
        rc = 0;
    }
    if (rc != 1)
        cw_reads_clear(r);
    Py_XDECREF(pending);
    Py_XDECREF(user);
    Py_XDECREF(verdicts);
    Py_XDECREF(lkey);
    Py_XDECREF(per_site);
    return rc;
}

static PyObject *
cw_call(CountedWrite *self, PyObject *args, PyObject *kwargs)
{
    LaneWrite *lw = (LaneWrite *)self;
    PyObject *rec, *active, *target, *verdict, *frame, *n, *aseq, *ident, *out, *agg;
    CwReads r = {NULL};
    int truth;
    if (self->index_write || PyDict_GET_SIZE(lw->lanes) || PyDict_GET_SIZE(self->in_step)
        || PyDict_GET_SIZE(self->paused) || PySet_GET_SIZE(self->in_write) || PyTuple_GET_SIZE(args) == 0)
        return lw_call(lw, args, kwargs);
    rec = PyObject_GetAttr(self->state, cw_s_recorder);
    if (rec == NULL)
        return NULL;
    if (rec == Py_None)
        goto python;
    active = PyObject_GetAttr(rec, cw_s_active);
    if (active == NULL) {
        PyErr_Clear(); /* the Python body reads it again, and raises what it raises */
        goto python;
    }
    Py_DECREF(active); /* the recorder's own attribute: a bool, alive while rec is */
    if (active != Py_True)
        goto python;
    target = PyTuple_GET_ITEM(args, 0);
    verdict = PyDict_GetItemWithError(lw->inspectable, (PyObject *)Py_TYPE(target));
    if (verdict != Py_True) {
        PyErr_Clear();
        goto python;
    }
    frame = (PyObject *)PyEval_GetFrame(); /* borrowed: the caller's (this wrapper has no frame) */
    if (frame == NULL)
        goto python;
    n = PyObject_CallNoArgs(lw->modes); /* a torch-function mode: the Python body writes unseen by it */
    if (n == NULL) {
        Py_DECREF(rec);
        return NULL;
    }
    truth = PyObject_IsTrue(n);
    Py_DECREF(n);
    if (truth != 0) {
        PyErr_Clear();
        goto python;
    }
    Py_INCREF(target); /* the caller's tuple keeps it, as the Python body's args do; held for the finalizers */
    Py_INCREF(frame);
    truth = cw_reads(self, rec, target, frame, &r);
    if (truth <= 0) {
        Py_DECREF(target);
        Py_DECREF(frame);
        if (truth < 0) {
            Py_DECREF(rec);
            return NULL;
        }
        goto python;
    }
    aseq = PyObject_CallNoArgs(self->get_seq);
    if (aseq == NULL) {
        PyErr_Clear();
        cw_reads_clear(&r);
        Py_DECREF(target);
        Py_DECREF(frame);
        goto python;
    }
    /* from here on, what the Python body does: counted, then the op */
    {
        PyObject *new = PyNumber_Add(r.old, cw_one);
        if (new == NULL || PyDict_SetItem(r.counts, r.site, new) < 0)
            PyErr_Clear();
        Py_XDECREF(new);
        agg = PyObject_GetAttr(rec, cw_s_aggregated);
        if (agg == NULL || cw_count(agg, PyTuple_GET_ITEM(self->aggregated, 0)) < 0)
            PyErr_Clear();
        Py_XDECREF(agg);
    }
    self->counted++;
    ident = PyLong_FromUnsignedLong(PyThread_get_thread_ident());
    if (ident == NULL || PySet_Add(self->in_write, ident) < 0) {
        Py_XDECREF(ident);
        out = NULL;
        goto after;
    }
    out = PyObject_Call(lw->orig, args, kwargs);
    if (out == NULL) { /* the op's exception: recorded (failed), then on to the program */
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyErr_NormalizeException(&type, &value, &tb);
        if (tb != NULL && value != NULL)
            PyException_SetTraceback(value, tb);
        if (value != NULL) {
            PyObject *res = PyObject_CallFunctionObjArgs(self->failed, rec, value, lw->op, target, frame, NULL);
            if (res == NULL)
                PyErr_Clear(); /* the program's exception goes on, not ours */
            Py_XDECREF(res);
            Py_XDECREF(tb);
            tb = PyException_GetTraceback(value); /* as `failed` left it */
        }
        if (PySet_Discard(self->in_write, ident) < 0)
            PyErr_Clear();
        PyErr_Restore(type, value, tb);
        Py_DECREF(ident);
        goto after;
    }
    if (PySet_Discard(self->in_write, ident) < 0)
        PyErr_Clear();
    Py_DECREF(ident);
    if (cw_after(self, rec, args, target, frame, r.code, r.lasti, r.v0, r.key, aseq, r.line) < 0)
        Py_CLEAR(out);
after:
    Py_DECREF(aseq);
    cw_reads_clear(&r);
    Py_DECREF(target);
    Py_DECREF(frame);
    Py_DECREF(rec);
    return out;
python:
    Py_DECREF(rec);
    return lw_call(lw, args, kwargs);
}

static PyObject *
cw_get_counted(CountedWrite *self, void *closure)
{
    return PyLong_FromSsize_t(self->counted);
}

static PyGetSetDef cw_getset[] = {
    {"counted", (getter)cw_get_counted, NULL, "the writes counted here", NULL},
    {NULL}
};

static PyTypeObject CountedWriteType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "tensorscope._speedups.CountedWrite",
    .tp_basicsize = sizeof(CountedWrite),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_DISALLOW_INSTANTIATION,
    .tp_doc = "A write wrapper's body whose counted writes are compiled too (see tensorscope/instrument/speedups.py).",
    .tp_dealloc = (destructor)cw_dealloc,
    .tp_traverse = (traverseproc)cw_traverse,
    .tp_clear = (inquiry)cw_clear,
    .tp_call = (ternaryfunc)cw_call,
    .tp_getset = cw_getset,
};

static PyObject *
counted_write(PyObject *module, PyObject *args)
{
    PyObject *lane, *state, *in_step, *in_write, *paused, *lines, *get_seq, *grad_enabled, *storage_key, *failed,
        *aggregated, *running_codes;
    int index_write;
    Py_ssize_t max_storages, max_writes;
    if (!cw_ready) {
        CountedWriteType.tp_base = &LaneWriteType;
        if (PyType_Ready(&CountedWriteType) < 0)
            return NULL;
#define INTERN(var, text) if ((var = PyUnicode_InternFromString(text)) == NULL) return NULL
        INTERN(cw_s_recorder, "recorder");
        INTERN(cw_s_active, "active");
        INTERN(cw_s_pending, "pending");
        INTERN(cw_s_user, "user");
        INTERN(cw_s_verdict, "_verdict");
        INTERN(cw_s_site_counts, "site_counts");
        INTERN(cw_s_per_site, "per_site");
        INTERN(cw_s_aggregated, "aggregated_counts");
        INTERN(cw_s_kept, "kept");
        INTERN(cw_s_young, "young");
        INTERN(cw_s_keys, "keys");
        INTERN(cw_s_shared, "shared");
        INTERN(cw_s_write_rest, "write_rest");
        INTERN(cw_s_write_log, "write_log");
        INTERN(cw_s_write, "write");
        INTERN(cw_s_f_lasti, "f_lasti");
#undef INTERN
        if ((cw_one = PyLong_FromLong(1)) == NULL)
            return NULL;
        cw_ready = 1;
    }
    if (!PyArg_ParseTuple(args, "O!OO!O!O!O!OOOOO!Opnn:counted_write", &LaneWriteType, &lane, &state, &PyDict_Type,
                          &in_step, &PySet_Type, &in_write, &PyDict_Type, &paused, &PyDict_Type, &lines, &get_seq,
                          &grad_enabled, &storage_key, &failed, &PyTuple_Type, &aggregated, &running_codes,
                          &index_write, &max_storages, &max_writes))
        return NULL;
    if (PyTuple_GET_SIZE(aggregated) != 1 || Py_TYPE(lane) != &LaneWriteType) {
        PyErr_SetString(PyExc_TypeError, "counted_write: a LaneWrite and a key of one");
        return NULL;
    }
    CountedWrite *self = (CountedWrite *)CountedWriteType.tp_alloc(&CountedWriteType, 0);
    if (self == NULL)
        return NULL;
    LaneWrite *src = (LaneWrite *)lane, *dst = (LaneWrite *)self;
    PyObject **base_fields[] = {&dst->op, &dst->orig, &dst->fallback, &dst->lanes, &dst->inspectable, &dst->modes,
                                &dst->ref, &dst->step_type};
    PyObject *base_values[] = {src->op, src->orig, src->fallback, src->lanes, src->inspectable, src->modes, src->ref,
                               src->step_type};
    for (size_t i = 0; i < sizeof(base_values) / sizeof(base_values[0]); i++) {
        Py_INCREF(base_values[i]);
        *base_fields[i] = base_values[i];
    }
    PyObject **fields[] = {&self->state, &self->in_step, &self->in_write, &self->paused, &self->lines,
                           &self->get_seq, &self->grad_enabled, &self->storage_key, &self->failed,
                           &self->aggregated, &self->running_codes};
    PyObject *values[] = {state, in_step, in_write, paused, lines, get_seq, grad_enabled, storage_key, failed,
                          aggregated, running_codes};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        Py_INCREF(values[i]);
        *fields[i] = values[i];
    }
    dst->hits = 0;
    self->index_write = index_write;
    self->max_storages = max_storages;
    self->max_writes = max_writes;
    self->counted = 0;
    return (PyObject *)self;
}
/* ---- end of speedw20's block ---- */

/* ---- speedc21's block: a storage's key read in place ----
 *
 * NOTE [A storage key read in place] in tensorscope/instrument/speedups.py says why and what is relied on.
 *
 * storage_key_setup(fallback, types, probes) finds, from probe tensors, the two offsets the read needs: where
 * a tensor's Python object holds its TensorImpl's address (the THPVariable's `cdata`: an owned at::Tensor on
 * 2.3 and later, a MaybeOwned<at::Tensor> on 2.2, whose `isBorrowed_` flag then sits before it) and where a
 * TensorImpl holds its StorageImpl's (`storage_`, a member of TensorImpl itself, so at the same offset in every
 * subclass of it). `probes` is a list of (tensor, its `_cdata`, torch's storage key of it); each offset must be
 * the one word that matches for every probe, or nothing is set up. Returns True where both were found.
 *
 * storage_key(t): for a tensor whose type is exactly one of `types` (torch.Tensor, nn.Parameter), the word at
 * the TensorImpl's storage offset, as an int, where it is not null (no storage: a sparse, batched or opaque
 * tensor, whose key torch refuses) and the object's flag word (2.2's `isBorrowed_`) is zero; every other
 * tensor, and every tensor before a setup succeeded, goes to `fallback` (torch's `_storage_address` or
 * `_storage_id`), with its result or its exception. */
static PyObject *sk_fallback = NULL, *sk_types = NULL;
static Py_ssize_t sk_obj_off = -1, sk_impl_off = -1, sk_flag_off = -1;

/* whether `t`'s type is exactly one of `types` and its object owns its cdata (2.2's flag word zero) */
static int
sk_plain(PyObject *t)
{
    if (sk_impl_off < 0)
        return 0;
    PyObject *tp = (PyObject *)Py_TYPE(t);
    Py_ssize_t n = PyTuple_GET_SIZE(sk_types);
    for (Py_ssize_t i = 0; i < n; i++)
        if (tp == PyTuple_GET_ITEM(sk_types, i))
            return sk_flag_off < 0 || *(void **)((char *)t + sk_flag_off) == NULL;
    return 0;
}

static PyObject *
storage_key(PyObject *module, PyObject *t)
{
    if (sk_plain(t)) { /* not 2.2's borrowed cdata (torch's own read then) */
        char *impl = *(char **)((char *)t + sk_obj_off);
        void *storage = impl == NULL ? NULL : *(void **)(impl + sk_impl_off);
        if (storage != NULL) /* null: no storage, torch's read raises */
            return PyLong_FromVoidPtr(storage);
    }
    if (sk_fallback == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "storage_key: not set up");
        return NULL;
    }
    return PyObject_CallOneArg(sk_fallback, t);
}

/* the one offset in [lo, hi) (a multiple of 8) at which every probe's object holds the probe's value, or -1 */
static Py_ssize_t
sk_find(PyObject *probes, Py_ssize_t lo, Py_ssize_t hi, int which)
{
    Py_ssize_t found = -1, n = PyList_GET_SIZE(probes);
    for (Py_ssize_t off = lo; off < hi; off += (Py_ssize_t)sizeof(void *)) {
        int all = 1;
        for (Py_ssize_t i = 0; i < n && all; i++) {
            PyObject *p = PyList_GET_ITEM(probes, i);
            char *base = which == 0 ? (char *)PyTuple_GET_ITEM(p, 0) : (char *)PyLong_AsVoidPtr(PyTuple_GET_ITEM(p, 1));
            void *want = PyLong_AsVoidPtr(PyTuple_GET_ITEM(p, which + 1));
            if (PyErr_Occurred())
                return -2;
            if (base == NULL || *(void **)(base + off) != want)
                all = 0;
        }
        if (all) {
            if (found >= 0)
                return -1; /* two offsets match: not unique, not used */
            found = off;
        }
    }
    return found;
}

static PyObject *
storage_key_setup(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3 || !PyTuple_Check(args[1]) || !PyList_Check(args[2])) {
        PyErr_SetString(PyExc_TypeError, "storage_key_setup(fallback, types, probes)");
        return NULL;
    }
    PyObject *types = args[1], *probes = args[2];
    Py_ssize_t n = PyList_GET_SIZE(probes);
    sk_impl_off = -1; /* off while being set up, and for good where anything below fails */
    Py_XSETREF(sk_fallback, Py_NewRef(args[0]));
    Py_XSETREF(sk_types, Py_NewRef(types));
    if (n < 2)
        Py_RETURN_FALSE;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(types); i++)
        if (!PyType_Check(PyTuple_GET_ITEM(types, i)))
            Py_RETURN_FALSE;
    Py_ssize_t head = (Py_ssize_t)sizeof(PyObject), min_basic = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(probes, i);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 3 || !PyLong_Check(PyTuple_GET_ITEM(p, 1))
            || !PyLong_Check(PyTuple_GET_ITEM(p, 2)))
            Py_RETURN_FALSE;
        Py_ssize_t basic = Py_TYPE(PyTuple_GET_ITEM(p, 0))->tp_basicsize;
        if (min_basic < 0 || basic < min_basic)
            min_basic = basic;
    }
    /* the object's cdata: right after the object's head, or one word later behind 2.2's flag */
    Py_ssize_t hi = head + 2 * (Py_ssize_t)sizeof(void *);
    if (min_basic < hi)
        Py_RETURN_FALSE;
    Py_ssize_t obj_off = sk_find(probes, head, hi, 0);
    if (obj_off == -2)
        return NULL;
    if (obj_off < 0)
        Py_RETURN_FALSE;
    Py_ssize_t flag_off = -1;
    if (obj_off > head) { /* a word between: it must read zero on every probe (an owned cdata) */
        flag_off = head;
        for (Py_ssize_t i = 0; i < n; i++)
            if (*(void **)((char *)PyTuple_GET_ITEM(PyList_GET_ITEM(probes, i), 0) + flag_off) != NULL)
                Py_RETURN_FALSE;
    }
    /* the TensorImpl's storage_: its first member, past its vtable and refcounts, so within its first 16 words
     * (a TensorImpl is larger than that on every release) */
    Py_ssize_t impl_off = sk_find(probes, (Py_ssize_t)sizeof(void *), 16 * (Py_ssize_t)sizeof(void *), 1);
    if (impl_off == -2)
        return NULL;
    if (impl_off < 0)
        Py_RETURN_FALSE;
    sk_obj_off = obj_off;
    sk_flag_off = flag_off;
    sk_impl_off = impl_off;
    Py_RETURN_TRUE;
}

/* version_setup(probes): `probes` a list of (tensor, its `_version`), after storage_key_setup succeeded. A
 * TensorImpl's `version_counter_` (a VariableVersion: one intrusive_ptr<VersionCounter>, null for an inference
 * tensor) is its third member after `storage_` on 2.2 to 2.15 (`storage_`, `autograd_meta_`, `extra_meta_`,
 * `version_counter_`); the VersionCounter's `version_` (a std::atomic<uint32_t>) follows its vtable and refcounts,
 * two words or three. Finds the one of the two offsets at which every probe's counter holds its version (the
 * probes' versions differ from each other), else leaves the in-place read off. Returns True where found. */
static Py_ssize_t vr_off = -1;

static void *
vr_counter(PyObject *t)
{
    char *impl = *(char **)((char *)t + sk_obj_off);
    if (impl == NULL)
        return NULL;
    return *(void **)(impl + sk_impl_off + 3 * (Py_ssize_t)sizeof(void *));
}

static PyObject *
version_setup(PyObject *module, PyObject *probes)
{
    vr_off = -1;
    if (sk_impl_off < 0 || !PyList_Check(probes) || PyList_GET_SIZE(probes) < 3)
        Py_RETURN_FALSE;
    Py_ssize_t n = PyList_GET_SIZE(probes), found = -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *p = PyList_GET_ITEM(probes, i);
        if (!PyTuple_Check(p) || PyTuple_GET_SIZE(p) != 2 || !PyLong_Check(PyTuple_GET_ITEM(p, 1)))
            Py_RETURN_FALSE;
        PyObject *t = PyTuple_GET_ITEM(p, 0);
        if (!sk_plain(t) || vr_counter(t) == NULL)
            Py_RETURN_FALSE;
    }
    for (Py_ssize_t off = 2 * (Py_ssize_t)sizeof(void *); off <= 3 * (Py_ssize_t)sizeof(void *); off += sizeof(void *)) {
        int all = 1;
        for (Py_ssize_t i = 0; i < n && all; i++) {
            PyObject *p = PyList_GET_ITEM(probes, i);
            unsigned long want = PyLong_AsUnsignedLong(PyTuple_GET_ITEM(p, 1));
            if (want == (unsigned long)-1 && PyErr_Occurred())
                return NULL;
            if (*(uint32_t *)((char *)vr_counter(PyTuple_GET_ITEM(p, 0)) + off) != want)
                all = 0;
        }
        if (all) {
            if (found >= 0)
                Py_RETURN_FALSE;
            found = off;
        }
    }
    if (found < 0)
        Py_RETURN_FALSE;
    vr_off = found;
    Py_RETURN_TRUE;
}

/* the version of a plain tensor with a counter, read in place (a new int), or NULL with no exception set */
static PyObject *
vr_read(PyObject *t)
{
    if (vr_off < 0 || !sk_plain(t))
        return NULL;
    char *counter = vr_counter(t);
    if (counter == NULL)
        return NULL; /* an inference tensor: torch's getter raises */
    return PyLong_FromUnsignedLong(__atomic_load_n((uint32_t *)(counter + vr_off), __ATOMIC_RELAXED));
}

static PyObject *
version_in_place(PyObject *module, PyObject *t)
{
    PyObject *v = vr_read(t);
    if (v == NULL && !PyErr_Occurred())
        Py_RETURN_NONE;
    return v;
}

/* The write's version: `target._version` as torch's getter reads it (version_of), or in place where that is the
 * same value: a plain tensor (exactly torch.Tensor or nn.Parameter, whose getter runs no Python: it asks only
 * whether a torch-function mode is on) with a counter, and no torch-function mode on (`modes` NULL where the
 * caller has just asked, else asked here). */
static PyObject *
version_read(PyObject *target, PyObject *modes)
{
    if (vr_off >= 0 && sk_plain(target)) {
        if (modes != NULL) {
            PyObject *n = PyObject_CallNoArgs(modes);
            if (n == NULL) {
                PyErr_Clear();
                return version_of(target);
            }
            int truth = PyObject_IsTrue(n);
            Py_DECREF(n);
            if (truth != 0) {
                PyErr_Clear();
                return version_of(target);
            }
        }
        PyObject *v = vr_read(target);
        if (v != NULL || PyErr_Occurred())
            return v;
    }
    return version_of(target);
}
/* ---- end of speedc21's block ---- */
