/* The record scanner of trafka.log.validation, in C (issue 12, item 3).
 *
 * scan_records(data, start, end, count, need_keys) walks the uncompressed records section
 * data[start:end] of a v2 batch and returns exactly what validation.scan_records_python
 * returns (the reference; tests/log/test_validation.py compares both on arbitrary bytes):
 *
 *   None                          every record is well formed (and keyed, if need_keys)
 *   (index, reason, None)         record `index` breaks rule `reason` (validation.REASONS)
 *   (-1, 0, [indices])            well formed, but these records have no key (need_keys)
 *
 * Every read is bounded by the end of the current record (or of the section); positions
 * are signed 64-bit so a length that overshoots is caught, never dereferenced.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

enum {
    OK = 0,
    TRUNCATED = 1,
    BAD_VARINT = 2,
    BAD_LENGTH = 3,
    BAD_OFFSET_DELTA = 4,
    BAD_KEY_LENGTH = 5,
    BAD_VALUE_LENGTH = 6,
    BAD_HEADER_COUNT = 7,
    BAD_HEADER_KEY_LENGTH = 8,
    BAD_HEADER_VALUE_LENGTH = 9,
    SIZE_MISMATCH = 10,
    TRAILING_BYTES = 11,
};

/* A zig-zag varint of at most max_bytes bytes at *pos, read below `end`: 5 bytes for an
 * int32 varint, 10 for an int64 varlong; a value outside the type is BAD_VARINT. */
static int read_varint_slow(const uint8_t *data, int64_t *pos, int64_t end, int max_bytes,
                            int64_t *value) {
    uint64_t unsigned_value = 0;
    int overflow = 0;
    int64_t p = *pos;
    int64_t limit = (end - p < max_bytes) ? end : p + max_bytes;
    for (int shift = 0; p < limit; p++, shift += 7) {
        uint64_t bits = data[p] & 0x7F;
        if (shift == 63) {
            if (bits > 1) overflow = 1;
            else unsigned_value |= bits << 63;
        } else {
            unsigned_value |= bits << shift;
        }
        if (data[p] < 0x80) {
            if (overflow) return BAD_VARINT;
            if (max_bytes == 5 && unsigned_value > 0xFFFFFFFFULL) return BAD_VARINT;
            *value = (int64_t)(unsigned_value >> 1) ^ -(int64_t)(unsigned_value & 1);
            *pos = p + 1;
            return OK;
        }
    }
    if (*pos + max_bytes <= end) return BAD_VARINT;
    return TRUNCATED;
}

/* The common cases inline (issue 12 item 3: the scan's cost on the produce path): a varint of
 * one or two bytes, fully below `end`, is decoded here; anything else (longer, truncated,
 * out of range) by read_varint_slow, with the same results. A value of two bytes is below
 * 2^14, within every type. */
static inline int read_varint(const uint8_t *data, int64_t *pos, int64_t end, int max_bytes,
                              int64_t *value) {
    int64_t p = *pos;
    if (p + 2 <= end) {
        uint64_t first = data[p];
        if (first < 0x80) {
            *value = (int64_t)(first >> 1) ^ -(int64_t)(first & 1);
            *pos = p + 1;
            return OK;
        }
        uint64_t second = data[p + 1];
        if (second < 0x80 && max_bytes >= 2) {
            uint64_t u = (first & 0x7F) | (second << 7);
            *value = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
            *pos = p + 2;
            return OK;
        }
    }
    return read_varint_slow(data, pos, end, max_bytes, value);
}

static int scan(const uint8_t *data, int64_t start, int64_t end, int64_t count, int need_keys,
                int64_t *bad_index, PyObject *keyless) {
    int64_t pos = start;
    int64_t value;
    int status;
    for (int64_t index = 0; index < count; index++) {
        *bad_index = index;
        if ((status = read_varint(data, &pos, end, 5, &value)) != OK) return status;
        if (value < 6) return BAD_LENGTH;
        int64_t body_end = pos + value;
        if (body_end > end) return TRUNCATED;
        pos += 1; /* attributes */
        if ((status = read_varint(data, &pos, body_end, 10, &value)) != OK) return status;
        if ((status = read_varint(data, &pos, body_end, 5, &value)) != OK) return status;
        if (value != index) return BAD_OFFSET_DELTA;
        if ((status = read_varint(data, &pos, body_end, 5, &value)) != OK) return status;
        if (value < -1) return BAD_KEY_LENGTH;
        if (value == -1) {
            if (need_keys) {
                PyObject *number = PyLong_FromLongLong(index);
                if (number == NULL || PyList_Append(keyless, number) < 0) {
                    Py_XDECREF(number);
                    return -1;
                }
                Py_DECREF(number);
            }
        } else {
            pos += value;
        }
        if ((status = read_varint(data, &pos, body_end, 5, &value)) != OK) return status;
        if (value < -1) return BAD_VALUE_LENGTH;
        if (value > 0) pos += value;
        int64_t headers;
        if ((status = read_varint(data, &pos, body_end, 5, &headers)) != OK) return status;
        if (headers < 0) return BAD_HEADER_COUNT;
        for (int64_t h = 0; h < headers; h++) {
            if ((status = read_varint(data, &pos, body_end, 5, &value)) != OK) return status;
            if (value < 0) return BAD_HEADER_KEY_LENGTH;
            pos += value;
            if ((status = read_varint(data, &pos, body_end, 5, &value)) != OK) return status;
            if (value < -1) return BAD_HEADER_VALUE_LENGTH;
            if (value > 0) pos += value;
        }
        if (pos != body_end) return SIZE_MISMATCH;
    }
    if (pos != end) {
        *bad_index = count;
        return TRAILING_BYTES;
    }
    return OK;
}

static PyObject *scan_records(PyObject *self, PyObject *args) {
    Py_buffer buffer;
    Py_ssize_t start, end;
    long long count;
    int need_keys;
    if (!PyArg_ParseTuple(args, "y*nnLp", &buffer, &start, &end, &count, &need_keys))
        return NULL;
    if (start < 0 || end < start || end > buffer.len) {
        PyBuffer_Release(&buffer);
        PyErr_SetString(PyExc_ValueError, "start/end outside the buffer");
        return NULL;
    }
    PyObject *keyless = PyList_New(0);
    if (keyless == NULL) {
        PyBuffer_Release(&buffer);
        return NULL;
    }
    int64_t bad_index = 0;
    int status;
    status = scan((const uint8_t *)buffer.buf, start, end, count, need_keys, &bad_index,
                  keyless);
    PyBuffer_Release(&buffer);
    if (status < 0) {
        Py_DECREF(keyless);
        return NULL;
    }
    if (status != OK) {
        Py_DECREF(keyless);
        return Py_BuildValue("(LiO)", (long long)bad_index, status, Py_None);
    }
    if (need_keys && PyList_GET_SIZE(keyless) > 0) {
        PyObject *result = Py_BuildValue("(LiO)", (long long)-1, 0, keyless);
        Py_DECREF(keyless);
        return result;
    }
    Py_DECREF(keyless);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"scan_records", scan_records, METH_VARARGS,
     "scan_records(data, start, end, count, need_keys): see trafka.log.validation."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "trafka.log._recordscan",
    "The C record scanner of trafka.log.validation.", -1, methods,
};

PyMODINIT_FUNC PyInit__recordscan(void) { return PyModule_Create(&module); }
