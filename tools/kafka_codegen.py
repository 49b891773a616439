#!/usr/bin/env python3
"""Generate skiff's C++ Kafka message codecs from Apache Kafka's JSON message schemas.

Usage:
  kafka_codegen.py --schemas DIR --out-dir DIR          -> messages.hpp, messages.cpp
  kafka_codegen.py --schemas DIR --fill-out FILE        -> a test helper that fills every field

Input: the files of clients/src/main/resources/common/message/ (src/kafka/schemas/). The schema
language is described in src/kafka/schemas/README.upstream.md; the wire format in
https://kafka.apache.org/protocol.html. Python 3 standard library only. The primitives the
generated code calls (reader, writer, uuid, decode_error) are in include/skiff/kafka/protocol.hpp.

What is generated (namespace skiff::kafka):
  - one struct per message, named as in the schema (PascalCase: FetchResponse), with its inline
    structs and commonStructs declared inside it (FetchResponse::PartitionData). PascalCase
    types keep the names greppable against Kafka's docs and cannot collide with the snake_case
    fields (FetchRequest has a field ReplicaState of type ReplicaState). Fields are snake_case
    (a C++ keyword gets a trailing underscore) with the schema's defaults;
  - per struct: encode(writer&, version), read(out, reader&, version) and decode(reader&,
    version) -> result<T, decode_error>, and a defaulted operator==;
  - per message: api (the api_key), message_name, min_version, max_version, flexible_from;
  - enum class api_key, api_table (name, valid versions, first flexible version, unstable
    flag), find_api(), is_flexible(), and decode_request()/decode_response() returning a
    std::variant of every request/response type.

Schema features and how they map:
  - types: bool, int8, int16, uint16, int32, uint32, int64, float64, uuid, string, bytes,
    records, structs, arrays of any of these ([]T). string/bytes are std::string, records are
    kafka::record_bytes (owned, or borrowed from the input: skiff/kafka/record_bytes.hpp);
    records are always std::optional (null by default), as are fields with nullableVersions.
  - error codes: a field named ErrorCode, or an int16 (or []int16) field whose name ends in
    ErrorCode, is kafka::error_code (skiff/kafka/errors.hpp), an int16 on the wire; any code,
    known or not, decodes and re-encodes unchanged.
  - versions / nullableVersions / flexibleVersions / taggedVersions: "N+", "N-M", "N", "none";
    conditions are simplified against validVersions. Field-level flexibleVersions (RequestHeader
    ClientId: "none") keeps the classic int16/int32 length in flexible versions.
  - flexible versions: compact lengths (unsigned varint length+1, 0 = null) and a tagged-fields
    section after every struct. Known tags are decoded from a sub-reader bounded by their size
    (a value shorter than its size is accepted, the rest skipped); unknown tags are skipped and
    not kept (re-encoding drops them). A tagged field is written only when it differs from its
    default, in ascending tag order. A field may be inline in old versions and tagged later.
  - nullable structs: int8 marker (-1 null, 1 present) in nullable versions.
  - defaults: decimal, 0x hex, 0-prefixed octal, true/false, floats, strings and "null".
  - ignorable: encoding a version that lacks a non-ignorable field whose value is not its
    default is an error recorded in the writer (Kafka's UnsupportedVersionException); ignorable
    fields are dropped silently. Decoding leaves absent fields at their defaults.
  - mapKey, entityType, about (emitted as comments), zeroCopy, listeners, deprecatedVersions:
    no effect on the wire, not used. latestVersionUnstable goes to api_table.
Not supported (the generator stops with an error): nullable uuid or scalar fields, defaults on
bytes/uuid/array/struct fields other than "null", arrays of arrays, recursive structs, a
request without its response (or versions differing between the two), and array elements that
take zero bytes in a non-flexible version (the reader bounds element counts by bytes left).
"""

import argparse
import json
import os
import re
import sys
import textwrap

# ----------------------------------------------------------------------------------------------
# Schema parsing


def strip_comments(text):
    """Remove // line comments, leaving // inside JSON strings (URLs) alone."""
    out = []
    i, n = 0, len(text)
    in_str = False
    while i < n:
        c = text[i]
        if in_str:
            out.append(c)
            if c == '\\' and i + 1 < n:
                out.append(text[i + 1])
                i += 2
                continue
            if c == '"':
                in_str = False
            i += 1
            continue
        if c == '"':
            in_str = True
            out.append(c)
            i += 1
            continue
        if c == '/' and i + 1 < n and text[i + 1] == '/':
            j = text.find('\n', i)
            i = n if j < 0 else j
            continue
        out.append(c)
        i += 1
    return ''.join(out)


class Versions:
    """A version spec: "N+", "N-M", "N" or "none"."""

    def __init__(self, spec):
        spec = str(spec).strip()
        self.spec = spec
        if spec == 'none':
            self.lo, self.hi = None, None
        elif spec.endswith('+'):
            self.lo, self.hi = int(spec[:-1]), None
        elif '-' in spec:
            a, b = spec.split('-')
            self.lo, self.hi = int(a), int(b)
        else:
            self.lo = self.hi = int(spec)
        if self.lo is not None and self.hi is not None and self.hi < self.lo:
            raise ValueError('bad version range ' + spec)

    @property
    def empty(self):
        return self.lo is None

    def contains(self, v):
        if self.empty:
            return False
        return v >= self.lo and (self.hi is None or v <= self.hi)

    def set(self, valid):
        return {v for v in range(valid.lo, valid.hi + 1) if self.contains(v)}

    def cond(self, valid, var='version'):
        """C++ condition 'version in self', simplified for versions within `valid`."""
        return cond_of(self.set(valid), valid, var)


def cond_of(versions, valid, var='version'):
    """C++ condition for 'version is in the set `versions`', knowing it lies within `valid`."""
    allv = list(range(valid.lo, valid.hi + 1))
    inside = sorted(v for v in versions if valid.lo <= v <= valid.hi)
    if not inside:
        return 'false'
    if len(inside) == len(allv):
        return 'true'
    runs = []
    for v in inside:
        if runs and runs[-1][1] == v - 1:
            runs[-1][1] = v
        else:
            runs.append([v, v])
    parts = []
    for lo, hi in runs:
        p = []
        if lo == hi and lo != valid.lo and hi != valid.hi:
            p.append('%s == %d' % (var, lo))
        else:
            if lo > valid.lo:
                p.append('%s >= %d' % (var, lo))
            if hi < valid.hi:
                p.append('%s <= %d' % (var, hi))
        parts.append(' && '.join(p))
    if len(parts) == 1:
        return parts[0]
    return ' || '.join('(%s)' % x for x in parts)


PRIMS = {
    # name: (C++ type, writer/reader suffix, minimal wire size)
    'bool': ('bool', 'bool', 1),
    'int8': ('std::int8_t', 'int8', 1),
    'int16': ('std::int16_t', 'int16', 2),
    'uint16': ('std::uint16_t', 'uint16', 2),
    'int32': ('std::int32_t', 'int32', 4),
    'uint32': ('std::uint32_t', 'uint32', 4),
    'int64': ('std::int64_t', 'int64', 8),
    'float64': ('double', 'float64', 8),
    'uuid': ('uuid', 'uuid', 16),
}
VARLEN = ('string', 'bytes', 'records')

# Error codes are int16 on the wire and kafka::error_code (include/skiff/kafka/errors.hpp) in the
# structs, so a handler cannot put a count or an api key where an error belongs. A code this
# broker does not know still round-trips: the enum holds any int16.
ERROR_CODE_CPP = 'kafka::error_code'


def is_error_code_field(name, type_text):
    """ErrorCode, and int16 fields named like PartitionErrorCode or TopicConfigErrorCode."""
    if name == 'ErrorCode' and type_text != 'int16':
        raise GenError('field ErrorCode must be int16, not ' + type_text)
    return name.endswith('ErrorCode') and type_text in ('int16', '[]int16')

CPP_KEYWORDS = set('''alignas alignof and and_eq asm auto bitand bitor bool break case catch char
char8_t char16_t char32_t class compl concept const consteval constexpr constinit const_cast
continue co_await co_return co_yield decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new
noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires return short signed sizeof static static_assert static_cast struct
switch template this thread_local throw true try typedef typeid typename union unsigned using
virtual void volatile wchar_t while xor xor_eq'''.split())

# Member names the generator itself gives every struct.
RESERVED_MEMBERS = {'encode', 'decode', 'read'}
# Static members of a top-level message struct.
RESERVED_TOP = {'api', 'message_name', 'min_version', 'max_version', 'flexible_from'}


def snake(name):
    s = re.sub(r'([A-Z]+)([A-Z][a-z])', r'\1_\2', name)
    s = re.sub(r'([a-z0-9])([A-Z])', r'\1_\2', s)
    s = s.lower()
    if s in CPP_KEYWORDS:
        s += '_'
    return s


def cpp_string_literal(s):
    out = ['"']
    for ch in s:
        if ch in '"\\':
            out.append('\\' + ch)
        elif 32 <= ord(ch) < 127:
            out.append(ch)
        else:
            for b in ch.encode('utf-8'):
                out.append('\\%03o' % b)
    out.append('"')
    return ''.join(out)


class GenError(Exception):
    pass


class FieldType:
    def __init__(self, text):
        self.text = text
        self.enum = None  # C++ enum type of an int16 held as an enum (error codes)
        if text.startswith('[]'):
            self.kind = 'array'
            self.elem = FieldType(text[2:])
            if self.elem.kind == 'array':
                raise GenError('arrays of arrays are not supported: ' + text)
        elif text in PRIMS or text in VARLEN:
            self.kind = 'prim'
            self.elem = None
        elif re.fullmatch(r'[A-Z][A-Za-z0-9]*', text):
            self.kind = 'struct'
            self.elem = None
        else:
            raise GenError('unknown type ' + text)

    @property
    def is_struct_like(self):
        return self.kind == 'struct' or (self.kind == 'array' and self.elem.kind == 'struct')

    @property
    def struct_name(self):
        return self.text if self.kind == 'struct' else self.elem.text


class Field:
    def __init__(self, msg, owner, d):
        self.msg = msg
        self.owner = owner  # Struct
        self.name = d['name']
        self.cpp = snake(self.name)
        if self.cpp in RESERVED_MEMBERS or (owner.path == msg_name_of(owner) and self.cpp in RESERVED_TOP):
            self.cpp += '_'
        self.type = FieldType(d['type'])
        if is_error_code_field(self.name, d['type']):
            (self.type.elem if self.type.kind == 'array' else self.type).enum = ERROR_CODE_CPP
        self.versions = Versions(d.get('versions', 'none'))
        self.nullable = Versions(d.get('nullableVersions', 'none'))
        self.tagged = Versions(d.get('taggedVersions', 'none'))
        self.tag = d.get('tag')
        self.ignorable = bool(d.get('ignorable', False))
        self.default = d.get('default')
        self.flex_override = Versions(d['flexibleVersions']) if 'flexibleVersions' in d else None
        self.about = ' '.join(str(d.get('about', '')).split())
        self.inline_fields = d.get('fields')
        if (self.tag is None) != self.tagged.empty:
            raise GenError('%s.%s: tag and taggedVersions go together' % (msg.name, self.name))
        if not self.tagged.empty and self.tagged.hi is not None:
            raise GenError('%s.%s: taggedVersions must be open-ended' % (msg.name, self.name))
        if not self.nullable.empty:
            t = self.type
            if t.kind == 'prim' and t.text not in VARLEN:
                raise GenError('%s.%s: nullable %s is not supported' % (msg.name, self.name, t.text))
        if self.flex_override is not None and not (self.type.kind == 'prim' and self.type.text in VARLEN):
            raise GenError('%s.%s: field flexibleVersions only for string/bytes' % (msg.name, self.name))

    @property
    def optional(self):
        """Held as std::optional: nullable in some version, or records (null by default)."""
        return not self.nullable.empty or self.type.text == 'records'

    def label(self):
        return '%s.%s' % (self.owner.path, self.cpp)


def msg_name_of(struct):
    return struct.path.split('.')[0]


class Struct:
    def __init__(self, msg, name, fields_json, path):
        self.msg = msg
        self.name = name
        self.path = path
        self.fields = [Field(msg, self, f) for f in fields_json]
        names = set()
        for f in self.fields:
            if f.cpp in names:
                raise GenError('%s: duplicate field %s' % (path, f.cpp))
            names.add(f.cpp)
        tags = [f.tag for f in self.fields if f.tag is not None]
        if len(tags) != len(set(tags)):
            raise GenError('%s: duplicate tag' % path)

    def deps(self):
        return [f.type.struct_name for f in self.fields if f.type.is_struct_like]


class Message:
    def __init__(self, d, filename):
        self.filename = filename
        self.name = d['name']
        self.type = d['type']
        self.api_key = d.get('apiKey')
        self.valid = Versions(d['validVersions'])
        if self.valid.empty or self.valid.hi is None:
            raise GenError(self.name + ': validVersions must be a closed range')
        self.flexible = Versions(d.get('flexibleVersions', 'none'))
        self.unstable = bool(d.get('latestVersionUnstable', False))
        self.structs = {}   # name -> Struct (nested and common), excluding the top level
        self.top = Struct(self, self.name, d['fields'], self.name)
        for cs in d.get('commonStructs', []):
            self._add_struct(cs['name'], cs['fields'])
        self._collect(self.top)
        for s in [self.top] + list(self.structs.values()):
            for f in s.fields:
                if f.type.is_struct_like and f.type.struct_name not in self.structs:
                    raise GenError('%s: unknown struct %s' % (self.name, f.type.struct_name))
        self.order = self._topo()

    def _add_struct(self, name, fields):
        if name == self.name:
            raise GenError('%s: nested struct named like the message' % name)
        if name in self.structs:
            raise GenError('%s: struct %s defined twice' % (self.name, name))
        s = Struct(self, name, fields, self.name + '.' + name)
        self.structs[name] = s
        self._collect(s)

    def _collect(self, s):
        for f in s.fields:
            if f.inline_fields is not None:
                if not f.type.is_struct_like:
                    raise GenError('%s: fields on a non-struct' % f.label())
                self._add_struct(f.type.struct_name, f.inline_fields)

    def _topo(self):
        order, state = [], {}

        def visit(n):
            if state.get(n) == 2:
                return
            if state.get(n) == 1:
                raise GenError('%s: recursive struct %s' % (self.name, n))
            state[n] = 1
            for d in self.structs[n].deps():
                visit(d)
            state[n] = 2
            order.append(self.structs[n])

        for n in self.structs:
            visit(n)
        return order

    @property
    def flexible_from(self):
        return -1 if self.flexible.empty else self.flexible.lo

    def versions(self):
        return range(self.valid.lo, self.valid.hi + 1)


def load_schemas(schema_dir):
    msgs = []
    for fn in sorted(os.listdir(schema_dir)):
        if not fn.endswith('.json'):
            continue
        with open(os.path.join(schema_dir, fn), encoding='utf-8') as fh:
            d = json.loads(strip_comments(fh.read()))
        msgs.append(Message(d, fn))
    if not msgs:
        raise GenError('no schemas in ' + schema_dir)
    return msgs


# ----------------------------------------------------------------------------------------------
# C++ types and defaults


def cpp_value_type(t, scope):
    """C++ type of one value of FieldType t (not wrapped in optional)."""
    if t.kind == 'prim':
        if t.enum:
            return t.enum
        if t.text in PRIMS:
            return PRIMS[t.text][0]
        if t.text == 'records':
            return 'kafka::record_bytes'
        return 'std::string'
    if t.kind == 'struct':
        return t.text
    return 'std::vector<%s>' % cpp_value_type(t.elem, scope)


def cpp_field_type(f):
    base = cpp_value_type(f.type, None)
    return 'std::optional<%s>' % base if f.optional else base


def parse_int_default(f, text):
    s = str(text).strip()
    neg = s.startswith('-')
    body = s[1:] if neg else s
    if re.fullmatch(r'0[xX][0-9a-fA-F]+', body):
        v = int(body, 16)
    elif re.fullmatch(r'0[0-7]+', body):
        v = int(body, 8)
    elif re.fullmatch(r'[0-9]+', body):
        v = int(body)
    else:
        raise GenError('%s: bad integer default %r' % (f.label(), text))
    return -v if neg else v


INT_RANGES = {
    'int8': (-2**7, 2**7 - 1), 'int16': (-2**15, 2**15 - 1), 'int32': (-2**31, 2**31 - 1),
    'int64': (-2**63, 2**63 - 1), 'uint16': (0, 2**16 - 1), 'uint32': (0, 2**32 - 1),
}


def default_init(f):
    """(member initializer text or None, default-value expression) for field f."""
    t = f.type
    d = f.default
    ctype = cpp_field_type(f)
    if t.kind == 'prim':
        if t.text in INT_RANGES:
            v = 0 if d is None else parse_int_default(f, d)
            lo, hi = INT_RANGES[t.text]
            if not lo <= v <= hi:
                raise GenError('%s: default out of range' % f.label())
            if t.text == 'int64' and v == lo:
                lit = '(-9223372036854775807 - 1)'
            elif t.text == 'int64' or t.text == 'uint32':
                lit = '%d%s' % (v, 'LL' if t.text == 'int64' else 'U')
            else:
                lit = str(v)
            if t.enum:
                lit = '%s::none' % t.enum if v == 0 else '%s{%s}' % (t.enum, lit)
                return lit, lit
            return lit, '%s{%s}' % (ctype, lit)
        if t.text == 'bool':
            v = 'false' if d is None else str(d).strip().lower()
            if v not in ('true', 'false'):
                raise GenError('%s: bad bool default' % f.label())
            return v, v
        if t.text == 'float64':
            v = 0.0 if d is None else float(d)
            lit = repr(v)
            if 'inf' in lit or 'nan' in lit:
                raise GenError('%s: unsupported float default' % f.label())
            return lit, lit
        if t.text == 'uuid':
            if d is not None:
                raise GenError('%s: uuid default unsupported' % f.label())
            return None, 'uuid{}'
        if t.text == 'records':
            if d is not None and d != 'null':
                raise GenError('%s: records default unsupported' % f.label())
            return None, '%s{}' % ctype
        # string / bytes
        if d == 'null':
            if not f.optional:
                raise GenError('%s: null default on a non-nullable field' % f.label())
            for v in f.msg.versions():
                if f.versions.contains(v) and not f.nullable.contains(v):
                    raise GenError('%s: null default but not nullable in v%d' % (f.label(), v))
            return None, '%s{}' % ctype
        if d is None or d == '':
            if f.optional:
                return 'std::string{}', '%s{std::string{}}' % ctype
            return None, '%s{}' % ctype
        if t.text == 'bytes':
            raise GenError('%s: bytes default unsupported' % f.label())
        lit = cpp_string_literal(str(d))
        return lit, '%s{%s}' % (ctype, lit)
    if t.kind == 'array' and d == 'null':
        # A nullable array whose default is null (AlterPartitionReassignments' Replicas: null
        # cancels a reassignment): the empty optional.
        for v in f.msg.versions():
            if f.versions.contains(v) and not f.nullable.contains(v):
                raise GenError('%s: null default but not nullable in v%d' % (f.label(), v))
        return None, '%s{}' % ctype
    if d is not None:
        raise GenError('%s: default on %s is unsupported' % (f.label(), t.text))
    if t.kind == 'array':
        if f.optional:
            # Kafka's default for an array is empty, not null.
            return '%s{}' % cpp_value_type(t, None), '%s{%s{}}' % (ctype, cpp_value_type(t, None))
        return None, '%s{}' % ctype
    # struct: default-constructed (value-initialised with its own member defaults)
    if f.optional:
        return '%s{}' % t.text, '%s{%s{}}' % (ctype, t.text)
    return None, '%s{}' % ctype


# ----------------------------------------------------------------------------------------------
# Code emission


class Out:
    def __init__(self):
        self.lines = []
        self.ind = 0

    def __call__(self, text=''):
        for line in text.split('\n'):
            self.lines.append(('    ' * self.ind + line) if line else '')

    def indent(self):
        self.ind += 1

    def dedent(self):
        self.ind -= 1

    def text(self):
        return '\n'.join(self.lines) + '\n'


def flex_cond(f, msg):
    """Condition under which f's variable-length encoding is compact."""
    fv = f.flex_override if f.flex_override is not None else msg.flexible
    c = fv.cond(msg.valid)
    return c


class Codec:
    """Emits encode/read statements for one value of a field."""

    def __init__(self, msg):
        self.msg = msg
        self.tmp = 0

    def fresh(self, base):
        self.tmp += 1
        return '%s%d' % (base, self.tmp)

    # --- encode
    def write_value(self, o, expr, t, f, compact, nullable, is_opt):
        """expr: C++ lvalue of C++ type (optional-wrapped when is_opt)."""
        label = cpp_string_literal(f.label())
        if t.kind == 'prim' and t.enum:
            o('w.write_%s(kafka::to_wire(%s));' % (PRIMS[t.text][1], expr))
        elif t.kind == 'prim' and t.text in PRIMS:
            o('w.write_%s(%s);' % (PRIMS[t.text][1], expr))
        elif t.kind == 'prim':
            kind = {'string': 'string', 'records': 'records'}.get(t.text, 'bytes')
            if is_opt:
                o('w.write_nullable_%s(%s, %s, %s, %s);' % (kind, expr, compact, nullable, label))
            else:
                o('w.write_%s(%s, %s, %s);' % (kind, expr, compact, label))
        elif t.kind == 'array':
            if is_opt:
                o('if (!%s) {' % expr)
                o('    w.write_null_array(%s, %s, %s);' % (compact, nullable, label))
                o('} else {')
                o.indent()
                self.write_array_body(o, '(*%s)' % expr, t, f, compact)
                o.dedent()
                o('}')
            else:
                self.write_array_body(o, expr, t, f, compact)
        else:  # struct
            if is_opt:
                o('if (!%s) {' % expr)
                if nullable == 'true':
                    o('    w.write_int8(-1);')
                elif nullable == 'false':
                    o('    w.fail(%s, "null value in a version where the field is not nullable");' % label)
                else:
                    o('    if (%s) w.write_int8(-1);' % nullable)
                    o('    else w.fail(%s, "null value in a version where the field is not nullable");' % label)
                o('} else {')
                if nullable == 'true':
                    o('    w.write_int8(1);')
                elif nullable != 'false':
                    o('    if (%s) w.write_int8(1);' % nullable)
                o('    %s->encode(w, version);' % expr)
                o('}')
            else:
                o('%s.encode(w, version);' % expr)

    def write_array_body(self, o, expr, t, f, compact):
        o('w.write_array_length(%s.size(), %s, %s);' % (expr, compact, cpp_string_literal(f.label())))
        e = self.fresh('e')
        o('for (const auto& %s : %s) {' % (e, expr))
        o.indent()
        if t.elem.kind == 'struct':
            o('%s.encode(w, version);' % e)
        else:
            self.write_value(o, e, t.elem, f, compact, 'false', False)
        o.dedent()
        o('}')

    # --- decode
    def read_value(self, o, target, t, f, compact, nullable, is_opt, rd, fail):
        """Reads into lvalue `target`; on error executes `fail(label)` (a return statement)."""
        label = cpp_string_literal(f.label())
        if t.kind == 'prim' and t.enum:
            wire = self.fresh('w')
            o('{')
            o('    %s %s = 0;' % (PRIMS[t.text][0], wire))
            o('    if (!%s.read_%s(%s)) %s' % (rd, PRIMS[t.text][1], wire, fail(label)))
            o('    %s = kafka::from_wire(%s);' % (target, wire))
            o('}')
        elif t.kind == 'prim' and t.text in PRIMS:
            o('if (!%s.read_%s(%s)) %s' % (rd, PRIMS[t.text][1], target, fail(label)))
        elif t.kind == 'prim':
            kind = {'string': 'string', 'records': 'records'}.get(t.text, 'bytes')
            if is_opt:
                o('if (!%s.read_nullable_%s(%s, %s, %s)) %s' % (rd, kind, target, compact, nullable, fail(label)))
            else:
                o('if (!%s.read_%s(%s, %s)) %s' % (rd, kind, target, compact, fail(label)))
        elif t.kind == 'array':
            n = self.fresh('n')
            o('{')
            o.indent()
            o('std::int32_t %s = 0;' % n)
            o('if (!%s.read_array_length(%s, %s, %s)) %s' % (rd, n, compact, nullable if is_opt else 'false', fail(label)))
            if is_opt:
                o('if (%s >= 0) {' % n)
                o.indent()
                vec = self.fresh('v')
                o('auto& %s = %s.emplace();' % (vec, target))
            else:
                vec = target
            o('%s.reserve(static_cast<std::size_t>(%s < 1024 ? %s : 1024));' % (vec, n, n))
            i = self.fresh('i')
            o('for (std::int32_t %s = 0; %s < %s; ++%s) {' % (i, i, n, i))
            o.indent()
            if t.elem.kind == 'struct':
                o('%s.emplace_back();' % vec)
                o('if (!%s::read(%s.back(), %s, version)) %s' % (t.elem.text, vec, rd, fail(None)))
            else:
                tmp = self.fresh('x')
                o('%s %s{};' % (cpp_value_type(t.elem, None), tmp))
                self.read_value(o, tmp, t.elem, f, compact, 'false', False, rd, fail)
                o('%s.push_back(std::move(%s));' % (vec, tmp))
            o.dedent()
            o('}')
            if is_opt:
                o.dedent()
                o('} else {')
                o('    %s.reset();' % target)
                o('}')
            o.dedent()
            o('}')
        else:  # struct
            if is_opt:
                if nullable != 'false':
                    m = self.fresh('m')
                    o('{')
                    o.indent()
                    o('std::int8_t %s = 1;' % m)
                    if nullable != 'true':
                        o('if ((%s) && !%s.read_int8(%s)) %s' % (nullable, rd, m, fail(label)))
                    else:
                        o('if (!%s.read_int8(%s)) %s' % (rd, m, fail(label)))
                    o('if (%s < 0) {' % m)
                    o('    %s.reset();' % target)
                    o('} else if (!%s::read(%s.emplace(), %s, version)) {' % (t.text, target, rd))
                    o('    %s' % fail(None))
                    o('}')
                    o.dedent()
                    o('}')
                else:
                    o('if (!%s::read(%s.emplace(), %s, version)) %s' % (t.text, target, rd, fail(None)))
            else:
                o('if (!%s::read(%s, %s, version)) %s' % (t.text, target, rd, fail(None)))


def struct_decl(o, msg, s, is_top):
    name = s.name
    if is_top and msg.order:
        # Nested structs are complete namespace-scope classes, aliased into the message: as
        # classes nested in it, their member defaults would not be parsed yet where the
        # enclosing class needs them (std::optional<Nested> checks is_constructible; CWG 1397).
        o('namespace schema::%s {' % msg.name)
        o()
        for ns in msg.order:
            struct_decl(o, msg, ns, False)
            o()
        o('} // namespace schema::%s' % msg.name)
        o()
    if is_top:
        o('// %s (%s%s), valid versions %s, flexible versions %s. Schema: %s'
          % (msg.name, msg.type, '' if msg.api_key is None else ', api key %d' % msg.api_key,
             msg.valid.spec, msg.flexible.spec, msg.filename))
    o('struct %s {' % name)
    o.indent()
    if is_top:
        if msg.api_key is not None:
            o('static constexpr kafka::api_key api = kafka::api_key::%s;' % api_enum_name(msg))
        o('static constexpr std::string_view message_name = "%s";' % msg.name)
        o('static constexpr std::int16_t min_version = %d;' % msg.valid.lo)
        o('static constexpr std::int16_t max_version = %d;' % msg.valid.hi)
        o('// First flexible (compact, tagged) version, or -1 if none is.')
        o('static constexpr std::int16_t flexible_from = %d;' % msg.flexible_from)
        o()
        for ns in msg.order:
            o('using %s = schema::%s::%s;' % (ns.name, msg.name, ns.name))
        if msg.order:
            o()
    for f in s.fields:
        init, _ = default_init(f)
        notes = ['v' + f.versions.spec]
        if not f.nullable.empty:
            notes.append('nullable v' + f.nullable.spec)
        if f.tag is not None:
            notes.append('tag %d v%s' % (f.tag, f.tagged.spec))
        if f.ignorable:
            notes.append('ignorable')
        text = '[%s] %s' % (', '.join(notes), f.about)
        for line in textwrap.wrap(text.strip(), 96):
            o('// ' + line)
        o('%s %s%s;' % (cpp_field_type(f), f.cpp, '' if init is None else ' = ' + init))
    if s.fields:
        o()
    if is_top:
        o('// Appends the body in `version`. Errors (version out of range, a null in a non-nullable')
        o('// version, a non-default value of a non-ignorable field the version lacks, an oversized')
        o('// string) are recorded in the writer: check w.ok() once at the end.')
    o('void encode(writer& w, std::int16_t version) const;')
    if is_top:
        o('// Decodes the body of `version` from rd; never reads past rd\'s end.')
    o('static result<%s, decode_error> decode(reader& rd, std::int16_t version);' % name)
    if is_top:
        o('// As decode(), into a default-constructed `out`; on false, rd.error() says why.')
    o('static bool read(%s& out, reader& rd, std::int16_t version);' % name)
    if is_top:
        o('// Resets every field `version` lacks (and cannot carry) to its default, recursively, so')
        o('// that encode(version) succeeds: a broker fills responses without caring which fields')
        o('// an old client\'s version has, and drops only what that client could not receive.')
    o('void normalize(std::int16_t version);')
    o('bool operator==(const %s&) const = default;' % name)
    o.dedent()
    o('};')


def field_sets(f, valid):
    """(present, inline, tagged) version sets of field f."""
    present = f.versions.set(valid)
    tagged = present & f.tagged.set(valid) if f.tag is not None else set()
    return present, present - tagged, tagged


def if_open(o, cond):
    if cond == 'true':
        return False
    o('if (%s) {' % cond)
    o.indent()
    return True


def if_close(o, opened):
    if opened:
        o.dedent()
        o('}')


def struct_defs(o, msg, s, is_top):
    q = msg.name if is_top else '%s::%s' % (msg.name, s.name)
    valid = msg.valid
    flex = msg.flexible.cond(valid)
    codec = Codec(msg)
    tagged = sorted([f for f in s.fields if field_sets(f, valid)[2]], key=lambda f: f.tag)
    vparam = '[[maybe_unused]] std::int16_t version'
    need_flex = flex != 'false'

    def compact_of(f):
        c = flex_cond(f, msg)
        return 'flexible' if c not in ('true', 'false') and c == flex else c

    # ---- encode
    o('void %s::encode(writer& w, %s) const {' % (q, vparam))
    o.indent()
    if is_top:
        o('if (version < min_version || version > max_version) {')
        o('    w.fail("%s", "unsupported version");' % msg.name)
        o('    return;')
        o('}')
    if need_flex:
        o('[[maybe_unused]] const bool flexible = %s;' % flex)
    for f in s.fields:
        present, inline, _ = field_sets(f, valid)
        _, dflt = default_init(f)
        label = cpp_string_literal(f.label())
        absent = set(range(valid.lo, valid.hi + 1)) - present
        if absent and not f.ignorable:
            o('if ((%s) && !(%s == %s)) {' % (cond_of(absent, valid), f.cpp, dflt))
            o('    w.fail(%s, "non-default value for a field this version lacks");' % label)
            o('}')
        c = cond_of(inline, valid)
        if c == 'false':
            continue
        opened = if_open(o, c)
        codec.write_value(o, f.cpp, f.type, f, compact_of(f), f.nullable.cond(valid), f.optional)
        if_close(o, opened)
    if need_flex:
        opened = if_open(o, 'flexible')
        if not tagged:
            o('w.write_unsigned_varint(0);')
        else:
            names = []
            for f in tagged:
                _, dflt = default_init(f)
                c = cond_of(field_sets(f, valid)[2], valid)
                hv = 'has_%s' % f.cpp
                names.append(hv)
                o('const bool %s = %s!(%s == %s);' % (hv, '' if c == 'true' else '(%s) && ' % c, f.cpp, dflt))
            o('w.write_unsigned_varint(%s);' % ' + '.join('static_cast<std::uint32_t>(%s)' % n for n in names))
            for f, hv in zip(tagged, names):
                o('if (%s) {' % hv)
                o.indent()
                o('w.write_unsigned_varint(%d);' % f.tag)
                o('const std::size_t mark = w.size();')
                codec.write_value(o, f.cpp, f.type, f, 'true', f.nullable.cond(valid), f.optional)
                o('w.insert_length(mark);')
                o.dedent()
                o('}')
        if_close(o, opened)
    o.dedent()
    o('}')
    o()

    # ---- normalize
    o('void %s::normalize(%s) {' % (q, vparam))
    o.indent()
    for f in s.fields:
        present, _, _ = field_sets(f, valid)
        _, dflt = default_init(f)
        absent = set(range(valid.lo, valid.hi + 1)) - present
        if absent and not f.ignorable:
            o('if (%s) %s = %s;' % (cond_of(absent, valid), f.cpp, dflt))
        if f.type.is_struct_like and present:
            opened = if_open(o, cond_of(present, valid))
            if f.type.kind == 'struct':
                if f.optional:
                    o('if (%s) %s->normalize(version);' % (f.cpp, f.cpp))
                else:
                    o('%s.normalize(version);' % f.cpp)
            else:
                target = '*%s' % f.cpp if f.optional else f.cpp
                if f.optional:
                    o('if (%s) {' % f.cpp)
                    o.indent()
                o('for (auto& e : %s) e.normalize(version);' % target)
                if f.optional:
                    o.dedent()
                    o('}')
            if_close(o, opened)
    o.dedent()
    o('}')
    o()

    # ---- read
    o('bool %s::read(%s& out, reader& rd, %s) {' % (q, s.name, vparam))
    o.indent()
    if is_top:
        o('if (version < min_version || version > max_version) {')
        o('    rd.fail("unsupported version");')
        o('    return rd.context("%s");' % msg.name)
        o('}')
    if need_flex:
        o('[[maybe_unused]] const bool flexible = %s;' % flex)

    def main_fail(label):
        return 'return rd.context(%s);' % label if label else 'return false;'

    def sub_fail(label):
        return 'return rd.adopt(sub, %s);' % (label if label else 'nullptr')

    for f in s.fields:
        c = cond_of(field_sets(f, valid)[1], valid)
        if c == 'false':
            continue
        opened = if_open(o, c)
        codec.read_value(o, 'out.' + f.cpp, f.type, f, compact_of(f), f.nullable.cond(valid), f.optional,
                         'rd', main_fail)
        if_close(o, opened)
    if need_flex:
        tag_label = cpp_string_literal('%s: tagged fields' % s.path)
        if not tagged:
            o('if (flexible && !rd.skip_tagged_fields()) return rd.context(%s);' % tag_label)
        else:
            opened = if_open(o, 'flexible')
            o('std::uint32_t count = 0;')
            o('if (!rd.read_unsigned_varint(count)) return rd.context(%s);' % tag_label)
            o('for (std::uint32_t i = 0; i < count; ++i) {')
            o.indent()
            o('std::uint32_t tag = 0;')
            o('std::uint32_t size = 0;')
            o('reader sub;')
            o('if (!rd.read_unsigned_varint(tag) || !rd.read_unsigned_varint(size) || !rd.sub_reader(size, sub)) {')
            o('    return rd.context(%s);' % tag_label)
            o('}')
            o('switch (tag) {')
            for f in tagged:
                o('case %d:' % f.tag)
                o.indent()
                opened2 = if_open(o, cond_of(field_sets(f, valid)[2], valid))
                codec.read_value(o, 'out.' + f.cpp, f.type, f, 'true', f.nullable.cond(valid), f.optional,
                                 'sub', sub_fail)
                if_close(o, opened2)
                o('break;')
                o.dedent()
            o('default:')
            o('    break;  // an unknown tag: its bytes are in `sub`, skipped')
            o('}')
            o.dedent()
            o('}')
            if_close(o, opened)
    o('return true;')
    o.dedent()
    o('}')
    o()
    o('result<%s, decode_error> %s::decode(reader& rd, std::int16_t version) {' % (q, q))
    o('    %s out;' % q)
    o('    if (!read(out, rd, version)) return failure{rd.error()};')
    o('    return out;')
    o('}')
    o()


def api_base_name(msg):
    n = msg.name
    for suf in ('Request', 'Response'):
        if n.endswith(suf):
            return n[:-len(suf)]
    return n


def api_enum_name(msg):
    return snake(api_base_name(msg))


def check_min_sizes(msg):
    """An array element must take at least one byte on the wire in every version where the array
    exists: the reader bounds each element count by the bytes left."""
    for s in [msg.top] + list(msg.structs.values()):
        for f in s.fields:
            if f.type.kind != 'array' or f.type.elem.kind != 'struct':
                continue
            es = msg.structs[f.type.elem.text]
            for v in msg.versions():
                if not f.versions.contains(v):
                    continue
                if msg.flexible.contains(v):
                    continue
                if not any(ef.versions.contains(v) and not ef.tagged.contains(v) for ef in es.fields):
                    raise GenError('%s: element %s is empty in v%d' % (f.label(), es.name, v))


def pair_apis(msgs):
    reqs = {m.api_key: m for m in msgs if m.type == 'request'}
    resps = {m.api_key: m for m in msgs if m.type == 'response'}
    apis = []
    for k in sorted(reqs):
        rq = reqs[k]
        rs = resps.get(k)
        if rs is None:
            raise GenError('%s has no response schema' % rq.name)
        if (rq.valid.lo, rq.valid.hi) != (rs.valid.lo, rs.valid.hi):
            raise GenError('%s: request and response valid versions differ' % rq.name)
        if rq.flexible_from != rs.flexible_from:
            raise GenError('%s: request and response flexible versions differ' % rq.name)
        apis.append((k, rq, rs))
    for k in resps:
        if k not in reqs:
            raise GenError('%s has no request schema' % resps[k].name)
    return apis


HEADER_PREAMBLE = '''// Generated by tools/kafka_codegen.py from src/kafka/schemas/ (Apache Kafka's message schemas,
// apache/kafka clients/src/main/resources/common/message/). Do not edit.
'''


def generate(msgs):
    for m in msgs:
        check_min_sizes(m)
    apis = pair_apis(msgs)
    h = Out()
    h(HEADER_PREAMBLE.rstrip('\n'))
    h('#pragma once')
    h()
    h('#include "skiff/kafka/errors.hpp"')
    h('#include "skiff/kafka/protocol.hpp"')
    h()
    h('#include <array>')
    h('#include <cstdint>')
    h('#include <optional>')
    h('#include <string>')
    h('#include <string_view>')
    h('#include <variant>')
    h('#include <vector>')
    h()
    h('namespace skiff::kafka {')
    h()
    h('// The API keys of the request/response pairs in src/kafka/schemas/.')
    h('enum class api_key : std::int16_t {')
    for k, rq, _ in apis:
        h('    %s = %d,' % (api_enum_name(rq), k))
    h('};')
    h()
    h('struct api_info {')
    h('    kafka::api_key key;')
    h('    std::string_view name;          // Kafka\'s name: "Produce", "ApiVersions", ...')
    h('    std::int16_t min_version;')
    h('    std::int16_t max_version;       // highest version the codec implements')
    h('    std::int16_t flexible_from;     // first flexible version, -1 if none')
    h('    bool latest_version_unstable;   // max_version is still in development upstream')
    h('};')
    h()
    h('// Every API with a codec, sorted by key: the source for an ApiVersions response.')
    h('inline constexpr std::array<api_info, %d> api_table{{' % len(apis))
    for k, rq, _ in apis:
        h('    {api_key::%s, "%s", %d, %d, %d, %s},' % (api_enum_name(rq), api_base_name(rq), rq.valid.lo,
                                                    rq.valid.hi, rq.flexible_from,
                                                    'true' if rq.unstable else 'false'))
    h('}};')
    h()
    h('// The table entry of `key`, or nullptr for a key without a codec.')
    h('const api_info* find_api(std::int16_t key) noexcept;')
    h()
    h('// Whether (key, version) uses the flexible encoding. Versions above max_version count as')
    h('// flexible when the API has flexible versions (Kafka never leaves the flexible encoding).')
    h('bool is_flexible(std::int16_t key, std::int16_t version) noexcept;')
    h()
    for m in msgs:
        struct_decl(h, m, m.top, True)
        h()
    h('// Any request or response body, by API key.')
    h('using any_request = std::variant<%s>;' % ', '.join(rq.name for _, rq, _ in apis))
    h('using any_response = std::variant<%s>;' % ', '.join(rs.name for _, _, rs in apis))
    h()
    h('// Decodes the body of request (key, version). Fails for an unknown key or a version outside')
    h('// the API\'s valid range, and on malformed input.')
    h('result<any_request, decode_error> decode_request(std::int16_t key, std::int16_t version, reader& rd);')
    h('result<any_response, decode_error> decode_response(std::int16_t key, std::int16_t version, reader& rd);')
    h()
    h('} // namespace skiff::kafka')

    c = Out()
    c(HEADER_PREAMBLE.rstrip('\n'))
    c('#include "messages.hpp"')
    c()
    c('#include <utility>')
    c()
    c('namespace skiff::kafka {')
    c()
    c('const api_info* find_api(std::int16_t key) noexcept {')
    c('    for (const auto& a : api_table) {')
    c('        if (static_cast<std::int16_t>(a.key) == key) return &a;')
    c('    }')
    c('    return nullptr;')
    c('}')
    c()
    c('bool is_flexible(std::int16_t key, std::int16_t version) noexcept {')
    c('    const api_info* a = find_api(key);')
    c('    return a != nullptr && a->flexible_from >= 0 && version >= a->flexible_from;')
    c('}')
    c()
    for m in msgs:
        c('// ---- %s' % m.name)
        c()
        for s in m.order:
            struct_defs(c, m, s, False)
        struct_defs(c, m, m.top, True)
    for which, idx, var in (('request', 1, 'any_request'), ('response', 2, 'any_response')):
        c('result<%s, decode_error> decode_%s(std::int16_t key, std::int16_t version, reader& rd) {' % (var, which))
        c('    switch (key) {')
        for api in apis:
            mm = api[idx]
            c('    case %d: {' % api[0])
            c('        auto r = %s::decode(rd, version);' % mm.name)
            c('        if (!r) return failure{std::move(r).error()};')
            c('        return %s{std::in_place_type<%s>, std::move(r).value()};' % (var, mm.name))
            c('    }')
        c('    default:')
        c('        return failure{decode_error{"unknown api key " + std::to_string(key)}};')
        c('    }')
        c('}')
        c()
    c('} // namespace skiff::kafka')
    return h.text(), c.text()


# ----------------------------------------------------------------------------------------------
# Test helper: fill every field present in a version with a non-default value


def fill_value(o, expr, t, f, msg, nullable, is_opt, depth):
    """Emits statements assigning a non-default value to expr (C++ lvalue)."""
    if is_opt and nullable != 'false':
        # null in about one case out of four where the version allows it
        o('if ((%s) && g.coin(4)) {' % nullable)
        o('    %s.reset();' % expr)
        o('} else {')
        o.indent()
        o('%s.emplace();' % expr)
        fill_value(o, '(*%s)' % expr, t, f, msg, 'false', False, depth)
        o.dedent()
        o('}')
        return
    if is_opt:
        o('%s.emplace();' % expr)
        fill_value(o, '(*%s)' % expr, t, f, msg, 'false', False, depth)
        return
    if t.kind == 'prim':
        if t.text == 'bool':
            o('%s = !%s;' % (expr, expr))
        elif t.text == 'float64':
            o('%s = g.real();' % expr)
        elif t.text == 'uuid':
            o('%s = g.id();' % expr)
        elif t.text in ('string', 'bytes', 'records'):
            o('%s = g.text();' % expr)
        elif t.enum:
            o('%s = kafka::from_wire(g.integer<%s>(kafka::to_wire(%s)));' % (expr, PRIMS[t.text][0], expr))
        else:
            o('%s = g.integer<%s>(%s);' % (expr, PRIMS[t.text][0], expr))
    elif t.kind == 'array':
        o('%s.clear();' % expr)
        o('for (int k = 0, n = 1 + g.below(2); k < n; ++k) {')
        o.indent()
        o('%s.emplace_back();' % expr)
        if t.elem.kind == 'struct':
            o('fill(%s.back(), version, g);' % expr)
        else:
            fill_value(o, '%s.back()' % expr, t.elem, f, msg, 'false', False, depth + 1)
        o.dedent()
        o('}')
    else:
        o('fill(%s, version, g);' % expr)


def generate_fill(msgs):
    o = Out()
    o(HEADER_PREAMBLE.rstrip('\n'))
    o('// Test support: fill(msg, version, g) gives every field present in `version` a non-default')
    o('// value (nullable ones are sometimes null), so an encode/decode round trip covers it.')
    o('#pragma once')
    o()
    o('#include "messages.hpp"')
    o()
    o('#include <cstdint>')
    o('#include <string>')
    o()
    o('namespace skiff::kafka::testing {')
    o()
    o('// Deterministic values (xorshift).')
    o('class value_source {')
    o('public:')
    o('    explicit value_source(std::uint64_t seed) : _s(seed * 2654435761u + 1) {}')
    o('    std::uint64_t next() {')
    o('        _s ^= _s << 13;')
    o('        _s ^= _s >> 7;')
    o('        _s ^= _s << 17;')
    o('        return _s;')
    o('    }')
    o('    int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }')
    o('    bool coin(int one_in) { return below(one_in) == 0; }')
    o('    // A value different from `current` (the default).')
    o('    template <typename T>')
    o('    T integer(T current) {')
    o('        T v = static_cast<T>(next());')
    o('        if (v == current) v = static_cast<T>(v + 1);')
    o('        return v;')
    o('    }')
    o('    double real() { return static_cast<double>(next() % 1000000) / 8.0 + 0.5; }')
    o('    uuid id() {')
    o('        uuid u;')
    o('        for (auto& b : u.bytes) b = static_cast<std::uint8_t>(next());')
    o('        u.bytes[0] |= 1;')
    o('        return u;')
    o('    }')
    o('    std::string text() {')
    o('        std::string s = "v";')
    o('        for (int i = 0, n = below(12); i < n; ++i) s.push_back(static_cast<char>(next()));')
    o('        return s;')
    o('    }')
    o()
    o('private:')
    o('    std::uint64_t _s;')
    o('};')
    o()
    allstructs = []
    for m in msgs:
        for s in m.order:
            allstructs.append((m, s, '%s::%s' % (m.name, s.name)))
        allstructs.append((m, m.top, m.name))
    for m, s, q in allstructs:
        o('inline void fill(%s& out, std::int16_t version, value_source& g);' % q)
    o()
    for m, s, q in allstructs:
        o('inline void fill(%s& out, [[maybe_unused]] std::int16_t version, [[maybe_unused]] value_source& g) {' % q)
        o.indent()
        for f in s.fields:
            present = f.versions.cond(m.valid)
            if present == 'false':
                continue
            o('if (%s) {' % present)
            o.indent()
            fill_value(o, 'out.' + f.cpp, f.type, f, m, f.nullable.cond(m.valid), f.optional, 0)
            o.dedent()
            o('}')
        o.dedent()
        o('}')
        o()
    o('// Calls f.template operator()<Msg>() for every top-level message type.')
    o('template <typename F>')
    o('void for_each_message(F&& f) {')
    for m in msgs:
        o('    f.template operator()<%s>();' % m.name)
    o('}')
    o()
    o('} // namespace skiff::kafka::testing')
    return o.text()


def write_file(path, text):
    tmp = path + '.tmp'
    with open(tmp, 'w', encoding='utf-8') as fh:
        fh.write(text)
    os.replace(tmp, path)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--schemas', required=True, help='folder of Kafka message JSON schemas')
    ap.add_argument('--out-dir', help='write messages.hpp and messages.cpp here')
    ap.add_argument('--fill-out', help='write the test fill helper to this file')
    args = ap.parse_args(argv)
    if not args.out_dir and not args.fill_out:
        ap.error('nothing to do: give --out-dir and/or --fill-out')
    try:
        msgs = load_schemas(args.schemas)
        if args.out_dir:
            hpp, cpp = generate(msgs)
            write_file(os.path.join(args.out_dir, 'messages.hpp'), hpp)
            write_file(os.path.join(args.out_dir, 'messages.cpp'), cpp)
        if args.fill_out:
            write_file(args.fill_out, generate_fill(msgs))
    except (GenError, ValueError, KeyError, json.JSONDecodeError) as e:
        print('kafka_codegen: error: %s' % e, file=sys.stderr)
        return 1
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
