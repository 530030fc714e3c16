#!/usr/bin/env python3
"""Generates vmcuda's remoting of NVIDIA's libraries whose calls name several kinds of object
(cuSPARSE: a handle and sparse/dense descriptors; cuSOLVER: a handle and parameter objects) from
their headers (issue 12 point 3), as scripts/gen-nvlib.py does cuFFT's and cuRAND's (one object
per call) and shares its header reading.

Inputs: NVIDIA's headers, the export list of NVIDIA's library (guest-lib/exports/, written by
`gen-nvlib.py --exports LIB`) and api/libs/LIB.calls. Outputs, into OUT/LIB (run by CMake):

  vmcuda/api/LIB_wire.h     one Args and one Reply struct per remoted call (api namespace)
  vmcuda/api/LIB_calls.def  their VMCUDA_CALL lines (included in calls.def's generated block)
  LIB_host_api.h            the host's table of the real library's entry points (ABI types)
  LIB_host.cc               Session::on_<name> for each generated call, LIB_destroy, and what a
                            resume needs: LibTraits::step_info and LibTraits::replay
  LIB_guest.cc              (libcuda.so.1) each generated entry point
  LIB_table.cc              a weak stub for every other export, and __vmcuda_LIB_table
  LIB_forward.c, libLIB.map vmcuda's libLIB.so.N: IFUNCs into that table, NVIDIA's version node

Objects (the library's handle and descriptor types, `objects` below) are guest handles on the
wire; every object a call names is looked up in the client's object list by its type. Only plain
values, objects, one stream, device pointers, host outputs, scalars (host value or device
pointer by the handle's pointer mode), host sizes read and written (inout), small host inputs
(hostin), host work areas, pointer-mode int outputs (modeout) and guest-kept descriptors passed
by value (by_value: cuSPARSE's legacy cusparseMatDescr_t, rebuilt on the host for each call)
are accepted: an annotated function with a parameter the script cannot classify is an error.

Suspend/resume (host-stub/src/nvobj.cc): a `replay` or `replace` call's handler records its wire
arguments on the object it makes, else on on=PARAM, else on its first object (NvobjStep); a
resume runs the recorded steps again through the same handlers, in the client's order. A call
marked notcarried=KEY (the reason a `notcarried KEY TEXT` line gives) is recorded as well, and
a suspend is refused while an object holds its record, with that reason (NvobjStepInfo).
"""
import argparse
import importlib.util
import os
import re
import sys


def _load(name, file):
    spec = importlib.util.spec_from_file_location(name, os.path.join(os.path.dirname(__file__), file))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_nvlib = _load("gen_nvlib", "gen-nvlib.py")
_cublas = _nvlib._cublas
strip, struct, header_note, write = _cublas.strip, _cublas.struct, _cublas.header_note, _cublas.write
prototypes, read_calls = _nvlib.prototypes, _nvlib.read_calls

# objects: C type -> object type (0 is the handle: its device's context runs the call, it keeps
# the stream and pointer mode); names: each object type in words (log lines). New types go at
# the end (a state file names them by number).
LIBS = {
    "cusparse": dict(
        headers=["cusparse.h"], enum_headers=["cusparse.h", "library_types.h"], macro="CUSPARSEAPI",
        soname="libcusparse.so.12", version="CUSPARSE_VER", Lib="Cusparse",
        objects={"cusparseHandle_t": 0, "cusparseSpMatDescr_t": 1, "cusparseConstSpMatDescr_t": 1,
                 "cusparseDnVecDescr_t": 2, "cusparseConstDnVecDescr_t": 2, "cusparseDnMatDescr_t": 3,
                 "cusparseConstDnMatDescr_t": 3, "cusparseSpVecDescr_t": 4, "cusparseConstSpVecDescr_t": 4,
                 "cusparseSpSVDescr_t": 5, "cusparseSpGEMMDescr_t": 6, "csrilu02Info_t": 7, "csric02Info_t": 8,
                 "bsrilu02Info_t": 9, "cusparseColorInfo_t": 10, "bsric02Info_t": 11, "bsrsv2Info_t": 12,
                 "bsrsm2Info_t": 13, "pruneInfo_t": 14},
        names=["handle", "sparse matrix descriptor", "dense vector descriptor", "dense matrix descriptor",
               "sparse vector descriptor", "SpSV descriptor", "SpGEMM descriptor", "csrilu02 info",
               "csric02 info", "bsrilu02 info", "color info", "bsric02 info", "bsrsv2 info", "bsrsm2 info",
               "prune info"],
        # The legacy API's cusparseMatDescr_t: the guest keeps it (guest-lib/src/cusparse.cc) and
        # sends its four fields with each call; the host makes the library's own for the call
        # (CusparseMatDescr, host-stub/src/cusparse.h), so nothing of it is carried by a suspend.
        by_value={"cusparseMatDescr_t": "CusparseMatDescr"},
        # Statuses with which a pointer-mode output (modeout) is still written and a zero pivot
        # counts as read (zeropivot): success and CUSPARSE_STATUS_ZERO_PIVOT.
        out_statuses=(0, 9),
        not_supported=("CUSPARSE_STATUS_NOT_SUPPORTED", 10)),
    "cusolver": dict(
        headers=["cusolverDn.h", "cusolver_common.h"],
        enum_headers=["cusolverDn.h", "cusolver_common.h", "cublas_api.h", "library_types.h"], macro="CUSOLVERAPI",
        soname="libcusolver.so.12", version="CUSOLVER_VER", Lib="Cusolver",
        objects={"cusolverDnHandle_t": 0, "cusolverDnParams_t": 1, "syevjInfo_t": 2, "gesvdjInfo_t": 3},
        names=["handle", "parameters object", "syevj information object", "gesvdj information object"],
        by_value={}, out_statuses=(0,),
        not_supported=("CUSOLVER_STATUS_NOT_SUPPORTED", 9)),
}

# Types passed by value: wire field type, the host's ABI type.
VALUES = {
    "int": ("int32_t", "int"), "unsigned int": ("uint32_t", "unsigned"), "unsigned": ("uint32_t", "unsigned"),
    "int64_t": ("int64_t", "int64_t"), "long long int": ("int64_t", "long long"), "long long": ("int64_t", "long long"),
    "unsigned long long": ("uint64_t", "unsigned long long"), "size_t": ("uint64_t", "size_t"),
    "float": ("float", "float"), "double": ("double", "double"), "signed char": ("int32_t", "signed char"),
    "char": ("int32_t", "char"),
}
OUT_TYPES = {"int": "int", "int64_t": "int64_t", "size_t": "size_t", "long long": "long long"}  # host outputs
HOSTBUF_MAX = 1 << 30  # a host work area the host makes for a call: at most 1 GiB
HOSTIN_MAX = 16  # the bytes of a host input (hostin:SIZE) the wire carries
SCALAR_BASES = ("void", "float", "double", "__half", "cuComplex", "cuDoubleComplex")  # a scalar's pointer types


AREAS_DEF = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "api", "include", "vmcuda", "api",
                         "library_areas.def")


def library_areas(libname, path=AREAS_DEF):
    """The call areas of `libname` (library_areas.def, which remoted_library_of follows too), as
    (first, last) call numbers."""
    for name, areas in re.findall(r"^VMCUDA_REMOTED_LIBRARY\((\w+)((?:,\s*0x[0-9a-fA-F]+)+)\)", open(path).read(), re.M):
        if name == libname:
            return [(int(a, 16) << 8, (int(a, 16) << 8) | 0xFF) for a in areas.split(",")[1:]]
    sys.exit(f"gen-nvobj.py: {path} names no areas for {libname}")


def c_string(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def enums(include, headers):
    names = set()
    for h in headers:
        text = strip(open(os.path.join(include, h)).read())
        # (an enum may end with a macro: cusparseSolvePolicy_t CUSPARSE_DEPRECATED_TYPE;)
        names |= set(re.findall(r"typedef enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*(?:[A-Z_]+\s*)?;", text))
        for a, b in re.findall(r"typedef\s+(\w+)\s+(\w+)\s*;", text):
            if a in names:
                names.add(b)
    return names


class Param:
    def __init__(self, lib, enum_names, fn, base, name, depth, role):
        self.base, self.name, self.depth, self.role = base, name, depth, role
        self.count = self.elem = None
        objects = lib["objects"]
        if depth == 0:
            if base in objects:
                self.kind, self.wire, self.host, self.guest, self.type = "obj", "uint64_t", "void*", "void*", objects[base]
            elif base in lib["by_value"]:  # a guest-kept descriptor: its fields, a host one per call
                self.kind, self.host, self.guest, self.cls = "byvalue", "void*", "void*", lib["by_value"][base]
            elif base == "cudaStream_t":
                self.kind, self.wire, self.host, self.guest = "stream", "uint64_t", "void*", "cudaStream_t"
            elif base in enum_names:
                self.kind, self.wire, self.host, self.guest = "value", "int32_t", "int", "int"
            elif base in VALUES:
                self.kind = "value"
                self.wire, self.host = VALUES[base]
                self.guest = self.host
            else:
                sys.exit(f"gen-nvobj.py: {fn}: cannot pass {base} {name}")
            return
        if base in objects and depth == 1:
            self.kind, self.wire, self.host, self.guest, self.type = "new", "uint64_t", "void**", "void**", objects[base]
            return
        role = role or "dev"
        self.guest = "void*"
        if role == "inout":  # a host size the library reads and writes (SpGEMM's bufferSize1/2)
            if depth != 1 or base not in OUT_TYPES:
                sys.exit(f"gen-nvobj.py: {fn}: inout {name} must point to an integer")
            t = OUT_TYPES[base]
            self.kind, self.wire, self.host, self.guest, self.cast = "inout", "uint64_t", t + "*", t + "*", "static_cast"
        elif role.startswith("hostin:"):  # up to HOSTIN_MAX bytes the library reads (an attribute's value)
            if depth != 1 or base != "void":
                sys.exit(f"gen-nvobj.py: {fn}: hostin {name} must be a void*")
            self.kind, self.count, self.host = "hostin", role[7:], "void*"
        elif role == "out":
            if depth == 2 and base == "void":  # a device pointer the library holds
                self.kind, self.host, self.guest, self.cast = "out", "void**", "void**", "reinterpret_cast"
            elif depth == 1 and (base in OUT_TYPES or base in enum_names):
                t = OUT_TYPES.get(base, "int")
                self.kind, self.host, self.guest, self.cast = "out", t + "*", t + "*", "static_cast"
            else:
                sys.exit(f"gen-nvobj.py: {fn}: the size of out {name} ({base}) is unknown")
        elif role.startswith("scalar:"):  # a host value or a device pointer, by the handle's pointer mode
            # scalar:TYPE names the cudaDataType parameter, or is the cudaDataType's number (a typed pointer)
            if depth != 1 or base not in SCALAR_BASES:
                sys.exit(f"gen-nvobj.py: {fn}: scalar {name} must be a void*, float*, double*, __half* or complex*")
            self.kind, self.count, self.host = "scalar", role[7:], "const void*"
        elif role == "modeout":  # an int output: host memory or, in device pointer mode, device memory
            if depth != 1 or base != "int":
                sys.exit(f"gen-nvobj.py: {fn}: modeout {name} must be an int*")
            self.kind, self.host, self.guest = "modeout", "int*", "int*"
        elif role.startswith("hostbuf:"):  # a host work area of that many bytes: the host makes its own
            self.kind, self.count, self.host = "hostbuf", role[8:], "void*"
        elif role == "dev" or role.startswith("dev:"):
            self.kind, self.wire, self.host = "dev", "uint64_t", "void*"
            if ":" in role:  # dev:COUNT*ELEM: the memory the library writes, checked whole on the host
                self.count, elem = role[4:].split("*")
                self.elem = int(elem)
        else:
            sys.exit(f"gen-nvobj.py: {fn}: unknown role {role} of {name}")

    def arg_fields(self):
        if self.kind in ("out", "hostbuf"):
            return []
        if self.kind == "hostin":
            return [("uint64_t", f"{self.name}[{HOSTIN_MAX // 8}]", HOSTIN_MAX)]
        if self.kind == "scalar":  # the value's bytes (up to a double complex), or the device pointer
            return [("uint64_t", f"{self.name}[2]", 16), ("uint64_t", f"{self.name}_ptr", 8)]
        if self.kind == "byvalue":  # four int32 fields (type, fill mode, diagonal type, index base)
            return [("uint64_t", f"{self.name}[2]", 16)]
        if self.kind == "modeout":  # in device pointer mode, where the library writes it
            return [("uint64_t", f"{self.name}_ptr", 8)]
        size = 4 if self.wire in ("int32_t", "uint32_t", "float") else 8
        return [(self.wire, self.name, size)]

    def reply_fields(self):
        return [("uint64_t", self.name, 8)] if self.kind in ("out", "inout", "modeout") else []


def generate(libname, lib, include, calls_path, exports_path, out):
    headers = [os.path.join(include, h) for h in lib["headers"]]
    protos = {}
    for h in headers:
        protos.update(prototypes(h, lib["macro"]))
    enum_names = enums(include, lib["enum_headers"])
    text = "".join(open(h).read() for h in headers)
    version = dict(re.findall(r"#define " + lib["version"] + r"_(MAJOR|MINOR|PATCH)\s+(\d+)", text))
    exports = [l.strip() for l in open(exports_path) if l.strip() and not l.startswith("#")]
    areas = library_areas(libname)
    reasons = {}  # notcarried KEY -> why a resume could not replay the calls that name it
    calls, local = read_calls(calls_path, (areas[0][0], areas[-1][1]), reasons)
    outside = [f"{c[0]:#x}" for c in calls if not any(lo <= c[0] <= hi for lo, hi in areas)]
    if outside:
        sys.exit(f"gen-nvobj.py: {calls_path}: calls {outside} are in no area of {libname} "
                 f"(library_areas.def: {', '.join(f'{lo:#x}-{hi:#x}' for lo, hi in areas)})")
    note = header_note(headers + [calls_path, exports_path]).replace("gen-cublas.py", "gen-nvobj.py")
    Lib, NS = lib["Lib"], libname

    def written(var):  # the statuses with which a modeout is written (lib's out_statuses), as C
        return " || ".join(f"{var} == {v}" for v in lib["out_statuses"])

    wire, defs, host_api, host_cc, guest_cc, destroys, replays = [], [], [], [], [], {}, []
    for number, name, flags, roles in calls:
        if name not in protos:
            sys.exit(f"gen-nvobj.py: {name} ({calls_path}) is not in {lib['headers']}")
        hand = "hand" in flags
        check = roles.pop("check", None)
        on = roles.pop("on", None)
        replay = "replay" in flags or "replace" in flags
        not_carried = roles.pop("notcarried", None)
        if not_carried is not None and (not replay or not_carried not in reasons):
            sys.exit(f"gen-nvobj.py: {name}: notcarried=KEY marks a replay/replace call, KEY a notcarried line's")
        ret, plist = protos[name]
        params = [Param(lib, enum_names, name, b, n, d, roles.get(n)) for b, n, d in plist]
        known = {p.name for p in params}
        for r in roles:
            if r not in known:
                sys.exit(f"gen-nvobj.py: {name}: {calls_path} names no parameter {r}")
        for p in params:
            if p.count and not p.count.isdigit() and p.count not in known:
                sys.exit(f"gen-nvobj.py: {name}: {p.name}'s count names no parameter {p.count}")
        clash = {p.name for p in params if p.name.endswith("_") or p.name in ("a", "r")}
        if clash:
            sys.exit(f"gen-nvobj.py: {name}: parameter names {sorted(clash)} clash with the generated code's")
        objs = [p for p in params if p.kind == "obj"]
        news = [p for p in params if p.kind == "new"]
        streams = [p for p in params if p.kind == "stream"]
        handle = next((p for p in objs if p.type == 0), None)
        if len(news) > 1 or len(streams) > 1 or (streams and not handle):
            sys.exit(f"gen-nvobj.py: {name}: at most one new object, and a stream only with the handle")
        if any(p.kind in ("scalar", "modeout") for p in params) and not handle:
            sys.exit(f"gen-nvobj.py: {name}: a scalar or modeout needs the handle (its pointer mode)")
        destroy = "destroy" in flags
        # What a resume replays (replay/replace): recorded on the object the call makes, else
        # on=PARAM, else its first object.
        target = None
        if replay:
            if hand or destroy:
                sys.exit(f"gen-nvobj.py: {name}: a hand-written or destroy call is not replayed")
            if news:
                target = news[0]
            elif on:
                target = next((p for p in objs if p.name == on), None)
                if target is None:
                    sys.exit(f"gen-nvobj.py: {name}: on={on} names no object parameter")
            elif objs:
                target = objs[0]
            else:
                sys.exit(f"gen-nvobj.py: {name}: a replayed call names an object")
            if any(p.kind in ("hostbuf",) for p in params):
                sys.exit(f"gen-nvobj.py: {name}: a call with a host work area is not replayed")
        elif on:
            sys.exit(f"gen-nvobj.py: {name}: on= without replay")
        if destroy:
            if len(objs) != 1:
                sys.exit(f"gen-nvobj.py: {name}: a destroy call names one object")
            destroys[objs[0].type] = name
        args_t, reply_t = f"{name}_Args", f"{name}_Reply"
        s, _ = struct(args_t, [f for p in params for f in p.arg_fields()])
        wire.append(s)
        rf = [f for p in params for f in p.reply_fields()]
        # A pointer-mode output is written with more statuses than success (a zero pivot's
        # position): the wire answers 0 and the reply carries the library's status.
        modeouts = [p for p in params if p.kind == "modeout"]
        if modeouts:
            rf.append(("uint64_t", "library_status", 8))
        if rf:
            s, _ = struct(reply_t, rf)
            wire.append(s)
        else:
            reply_t = "Empty"
        waits = "wait" in flags or bool(news) or any(p.kind in ("out", "inout", "hostbuf", "modeout") for p in params)
        defs.append(f"VMCUDA_CALL({number:#06x}, {name}, {args_t}, {reply_t}, {'0' if waits else 'kQueued'})")
        host_api.append(f"  X({name}, int (*)({', '.join(p.host for p in params)}))")
        if hand:
            continue

        # ---- host handler
        b = [f"int32_t Session::on_{name}(const api::{args_t}& a, api::{reply_t}& {'r' if rf else ''}, Request&) {{",
             f"  {Lib}Scope scope_(*this, \"{name}\");",
             f"  if (!scope_.ok() || !scope_.has(scope_.lib->{name})) return scope_.status();"]
        # The handle first: its device's context runs the call.
        for p in sorted(objs, key=lambda p: p.type != 0):
            b.append(f"  void* {p.name}_ = scope_.object(a.{p.name}, {p.type}, \"{p.name}\");")
            b.append(f"  if (!scope_.ok()) return scope_.status();")
        for p in news:
            if p.type == 0:
                b.append(f"  if (!scope_.charge()) return scope_.status();")
            b.append(f"  if (!scope_.fresh(a.{p.name})) return guest_fault(\"{name}: an object handle that is not new\");")
            b.append(f"  void* {p.name}_ = nullptr;")
        call_args = []
        for p in params:
            if p.kind == "obj":
                call_args.append(f"{p.name}_")
            elif p.kind == "new":
                call_args.append(f"&{p.name}_")
            elif p.kind == "value":
                call_args.append(f"a.{p.name}")
            elif p.kind == "stream":
                b.append(f"  void* {p.name}_ = nullptr;")
                b.append(f"  if (!scope_.stream(a.{p.name}, &{p.name}_)) return scope_.status();")
                call_args.append(f"{p.name}_")
            elif p.kind == "dev":
                count, elem = (f"a.{p.count}", p.elem) if p.count else ("1", 1)
                b.append(f"  if (!scope_.device(a.{p.name}, {count}, {elem})) return scope_.bad_pointer(\"{p.name}\");")
                call_args.append(f"reinterpret_cast<void*>(a.{p.name})")
            elif p.kind == "scalar":
                dtype = p.count if p.count.isdigit() else f"a.{p.count}"
                b.append(f"  const void* {p.name}_ = scope_.scalar(a.{p.name}, a.{p.name}_ptr, {dtype});")
                b.append(f"  if (!scope_.ok()) return scope_.bad_pointer(\"{p.name}\");")
                call_args.append(f"{p.name}_")
            elif p.kind == "hostbuf":
                b.append(f"  std::vector<std::byte> {p.name}_;")
                b.append(f"  if (!scope_.host_buffer(a.{p.count}, {p.name}_)) return scope_.status();")
                call_args.append(f"{p.name}_.empty() ? nullptr : {p.name}_.data()")
            elif p.kind == "out":
                b.append(f"  {p.host[:-1]} {p.name}_{{}};")
                call_args.append(f"&{p.name}_")
            elif p.kind == "inout":
                b.append(f"  {p.host[:-1]} {p.name}_ = static_cast<{p.host[:-1]}>(a.{p.name});")
                call_args.append(f"&{p.name}_")
            elif p.kind == "byvalue":  # the library's own descriptor for this call, from the guest's fields
                b.append(f"  const {p.cls} {p.name}_d_(*scope_.lib, a.{p.name});")
                b.append(f"  if (!{p.name}_d_.ok()) return {p.name}_d_.status();")
                call_args.append(f"{p.name}_d_.get()")
            elif p.kind == "modeout":
                b.append(f"  int {p.name}_{{}};")
                b.append(f"  int* {p.name}_p_ = scope_.mode_out(a.{p.name}_ptr, &{p.name}_);")
                b.append(f"  if (!scope_.ok()) return scope_.bad_pointer(\"{p.name}\");")
                call_args.append(f"{p.name}_p_")
            elif p.kind == "hostin":
                b.append(f"  if (a.{p.count} > sizeof a.{p.name}) return scope_.bad_pointer(\"{p.name}\");")
                b.append(f"  uint64_t {p.name}_[{HOSTIN_MAX // 8}];")
                b.append(f"  std::memcpy({p.name}_, a.{p.name}, sizeof {p.name}_);")
                call_args.append(f"{p.name}_")
        b.append(f"  const int st_ = scope_.lib->{name}({', '.join(call_args)});")
        for p in params:
            if p.kind in ("out", "inout"):
                conv = "reinterpret_cast<uintptr_t>" if p.host == "void**" else "static_cast<uint64_t>"
                b.append(f"  r.{p.name} = {conv}({p.name}_);")
            if p.kind == "modeout":
                b.append(f"  r.{p.name} = static_cast<uint64_t>(static_cast<uint32_t>({p.name}_));")
        if modeouts:
            b.append(f"  r.library_status = static_cast<uint64_t>(static_cast<uint32_t>(st_));")
        for p in news:
            b.append(f"  if (st_ == 0) scope_.adopt(a.{p.name}, {p.type}, {p.name}_);")
        for p in streams:
            b.append(f"  if (st_ == 0) scope_.set_stream(a.{p.name});")
        if "pointermode" in flags:
            mode = next(p for p in params if p.kind == "value")
            b.append(f"  if (st_ == 0) scope_.set_pointer_mode(a.{mode.name});")
        if replay:  # what a resume replays, in the client's order (NvobjStep)
            b.append(f"  if (st_ == 0) scope_.record(api::Call::{name}, a, a.{target.name}, {'true' if 'replace' in flags else 'false'});")
            devs = [f"a.{p.name}" for p in params if p.kind == "dev"] + \
                   [f"a.{p.name}_ptr" for p in params if p.kind in ("scalar", "modeout")]
            replays.append((name, args_t, reply_t, target, [p for p in objs if p is not target],
                            streams[0] if streams else None, news[0].type if news else -1, devs,
                            not_carried))
        if "factor" in flags or "zeropivot" in flags:  # a zero pivot left in the info object (nvobj.h)
            info = next((p for p in objs if p.type != 0), None)
            if info is None:
                sys.exit(f"gen-nvobj.py: {name}: factor/zeropivot names an info object")
            b.append(f"  if ({written('st_')}) scope_.set_pivot_unread(a.{info.name}, {'true' if 'factor' in flags else 'false'});")
        if destroy:
            b.append(f"  scope_.remove();  // gone from the guest whatever the library answers")
        if modeouts:  # the reply (with the library's status) must reach the guest
            b.append(f"  return {written('st_')} ? 0 : st_;")
        else:
            b.append("  return st_;")
        b.append("}")
        host_cc.append("\n".join(b))

        # ---- guest entry point
        g = [f"VMCUDA_{Lib.upper()}_API int {name}({', '.join(f'{p.guest} {p.name}' for p in params)}) {{"]
        for p in objs:
            g.append(f"  Handle* {p.name}_;")
            g.append(f"  if (int s_ = enter({p.name}, {p.type}, &{p.name}_)) return s_;")
        for p in news:
            g.append(f"  if (!{p.name}) return kInvalidValue;")
        for p in params:
            if p.kind in ("out", "inout"):
                g.append(f"  if (!{p.name}) return kInvalidValue;")
            if p.kind == "hostin":
                g.append(f"  if (!{p.name} || {p.count} > {HOSTIN_MAX}) return kInvalidValue;")
            if p.kind in ("scalar", "modeout"):  # host mode: read or written here (NULL: the library's invalid value)
                g.append(f"  if (!{handle.name}_->pointer_mode && !{p.name}) return kInvalidValue;")
        if check:  # check=EXPR: the library's own argument check, a status (0: good), made before queuing
            g.append(f"  if (int s_ = {check}) return s_;")
        g.append(f"  api::{args_t} a_{{}};")
        for p in news:
            g.append(f"  auto {p.name}_ = make_handle({p.type});")
            g.append(f"  a_.{p.name} = {p.name}_->wire;")
        for p in params:
            if p.kind == "obj":
                g.append(f"  a_.{p.name} = {p.name}_->wire;")
            elif p.kind == "value":
                g.append(f"  a_.{p.name} = {p.name};")
            elif p.kind == "inout":
                g.append(f"  a_.{p.name} = static_cast<uint64_t>(*{p.name});")
            elif p.kind == "hostin":
                g.append(f"  std::memcpy(a_.{p.name}, {p.name}, {p.count});")
            elif p.kind == "dev":
                g.append(f"  a_.{p.name} = device_pointer({p.name});")
            elif p.kind == "stream":
                g.append(f"  if (stream_handle({p.name}, &a_.{p.name})) return kInvalidValue;")
            elif p.kind == "scalar":
                g.append(f"  if ({handle.name}_->pointer_mode) a_.{p.name}_ptr = device_pointer({p.name});")
                g.append(f"  else std::memcpy(a_.{p.name}, {p.name}, scalar_bytes({p.count}));")
            elif p.kind == "modeout":
                g.append(f"  if ({handle.name}_->pointer_mode) a_.{p.name}_ptr = device_pointer({p.name});")
            elif p.kind == "byvalue":  # the guest's descriptor's fields (NULL or not one: invalid value)
                g.append(f"  if (!descr_fields({p.name}, a_.{p.name})) return kInvalidValue;")
        if destroy:
            g.append(f"  forget({objs[0].name}_);")
        if waits:
            g.append(f"  api::{reply_t} reply_{{}};")
            if modeouts:  # the library's status comes in the reply (above)
                g.append(f"  if (const int w_ = wait<api::Call::{name}>(a_, &reply_); w_ != kSuccess) return w_;")
                g.append(f"  const int s_ = static_cast<int>(reply_.library_status);")
            else:
                g.append(f"  const int s_ = wait<api::Call::{name}>(a_, &reply_);")
            for p in params:
                if p.kind in ("out", "inout"):
                    g.append(f"  if (s_ == kSuccess) *{p.name} = {p.cast}<{p.host[:-1]}>(reply_.{p.name});")
                if p.kind == "modeout":
                    g.append(f"  if (({written('s_')}) && !{handle.name}_->pointer_mode) *{p.name} = static_cast<int>(reply_.{p.name});")
            for p in news:
                g.append(f"  if (s_ == kSuccess) publish(std::move({p.name}_), {p.name});")
            g.append("  return s_;")
        else:
            if "pointermode" in flags:
                mode = next(p for p in params if p.kind == "value")
                g.append(f"  {handle.name}_->pointer_mode = {mode.name};")
            g.append(f"  return queue<api::Call::{name}>(a_);")
        g.append("}")
        guest_cc.append("\n".join(g))

    implemented = {c[1] for c in calls} | set(local)
    missing = implemented - set(exports)
    if missing:
        sys.exit(f"gen-nvobj.py: not exported by NVIDIA's {lib['soname']}: {sorted(missing)}")
    n_types = len(lib["names"])
    missing_destroy = [lib["names"][t] for t in range(n_types) if t not in destroys]
    if missing_destroy:
        sys.exit(f"gen-nvobj.py: {calls_path}: no destroy call for {missing_destroy}")

    nl = "\n"
    d = os.path.join(out, NS)
    write(os.path.join(d, f"vmcuda/api/{NS}_wire.h"), f"""// {note}
// The wire structs of the {NS} calls (api/libs/{NS}.calls): fixed-width fields, largest first,
// no padding. Objects are guest handles; pointers are device pointers or 0; a scalar is its
// value's bytes (NAME) or, in the handle's device pointer mode, a device pointer (NAME_ptr).
#pragma once
#include <cstdint>
#include <type_traits>
namespace vmcuda::api {{
{nl.join(wire)}
}}  // namespace vmcuda::api
""")
    write(os.path.join(d, f"vmcuda/api/{NS}_calls.def"), f"""// {note}
// {NS} ({', '.join(f'{lo:#x}-{hi:#x}' for lo, hi in areas)}): api/libs/{NS}.calls. Included in calls.def's generated block.
{nl.join(defs)}
""")
    write(os.path.join(d, f"{NS}_host_api.h"), f"""// {note}
// The {lib['soname']} entry points the host calls (one per remoted call), with ABI types.
#pragma once
#include <cstddef>
#include <cstdint>
#define VMCUDA_{NS.upper()}_FUNCTIONS(X) \\
{(' ' + chr(92) + nl).join(host_api)}
// Object types (api/libs/{NS}.calls; 0 is the handle) and their names.
#define VMCUDA_{NS.upper()}_OBJECT_TYPES {n_types}
#define VMCUDA_{NS.upper()}_OBJECT_NAMES {{{', '.join(f'"{n}"' for n in lib['names'])}}}
""")
    cases = "\n".join(f"    case {t}: return lib.{n} ? lib.{n}(o) : 0;" for t, n in sorted(destroys.items()))
    # A resume's replay of the recorded steps (NvobjStep): what each names, and the call again
    # through its handler (which checks it as it checks the guest's).
    info_cases, replay_cases = [], []
    unused = set(reasons) - {r[-1] for r in replays}
    if unused:
        sys.exit(f"gen-nvobj.py: {calls_path}: notcarried {sorted(unused)} marks no call")
    for name, args_t, reply_t, target, others, stream, makes, devs, reason in replays:
        lines = [f"    case static_cast<uint32_t>(api::Call::{name}): {{",
                 f"      api::{args_t} a;",
                 "      if (bytes.size() != sizeof a) return false;",
                 "      std::memcpy(&a, bytes.data(), sizeof a);",
                 f"      out->target = a.{target.name};",
                 f"      out->makes = {makes};"]
        if stream:
            lines.append(f"      out->stream = a.{stream.name};")
        for o in others:
            lines.append(f"      out->others.push_back(a.{o.name});")
        for ptr in devs:
            lines.append(f"      out->memory.push_back({ptr});")
        if reason:  # notcarried: why, the object in words, and the call that lets a suspend go on
            lines += [f"      out->not_carried = {c_string(reasons[reason])};",
                      f"      out->object = {c_string(lib['names'][target.type])};",
                      f"      out->destroyed_by = {c_string(destroys[target.type])};"]
        lines += ["      return true;", "    }"]
        info_cases.append("\n".join(lines))
        replay_cases.append("\n".join([
            f"    case static_cast<uint32_t>(api::Call::{name}): {{",
            f"      api::{args_t} a;",
            f"      if (bytes.size() != sizeof a) return kInvalidValue;",
            "      std::memcpy(&a, bytes.data(), sizeof a);",
            f"      api::{reply_t} r{{}};",
            f"      return s.on_{name}(a, r, req);",
            "    }"]))
    write(os.path.join(d, f"{NS}_host.cc"), f"""// {note}
// The host handlers of the generated {NS} calls (hand-written helpers: host-stub/src/{NS}.h).
#include <cstring>
#include <span>
#include <vector>

#include "{NS}.h"

namespace vmcuda::host {{

{(nl + nl).join(host_cc)}

// A recorded step's objects (false: no call a resume replays, or bytes of another size).
bool {Lib}Traits::step_info(uint32_t call, std::span<const std::byte> bytes, NvobjStepInfo* out) {{
  *out = NvobjStepInfo{{}};
  switch (call) {{
{nl.join(info_cases)}
  }}
  return false;
}}

// A resume: the recorded call made again through its handler; the library's status.
int32_t {Lib}Traits::replay(Session& s, uint32_t call, std::span<const std::byte> bytes) {{
  vmrpc::RegionView none;
  const vmrpc::CallContext ctx{{s.info_, none}};
  Request req{{{{}}, {{}}, 0, ctx}};
  switch (call) {{
{nl.join(replay_cases)}
  }}
  return kInvalidValue;
}}

// The object `o` of type `type` destroyed by the library (the client's teardown).
int {NS}_destroy(const {Lib}Api& lib, int type, void* o) {{
  switch (type) {{
{cases}
  }}
  return 0;
}}

}}  // namespace vmcuda::host
""")
    write(os.path.join(d, f"{NS}_guest.cc"), f"""// {note}
// libcuda.so.1's generated {NS} entry points (helpers: guest-lib/src/{NS}.h).
#include <cstring>

#include "{NS}.h"

using namespace vmcuda::guest::{NS};
namespace api = vmcuda::api;

{(nl + nl).join(guest_cc)}
""")
    # the guest library: stubs, the table, the forwarders, the version script (as gen-nvlib.py's)
    _nvlib.write_library(d, NS, lib["soname"], note, exports, implemented, lib["not_supported"], version)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=sorted(LIBS), required=True)
    ap.add_argument("--include", required=True, help="the CUDA toolkit's include folder")
    ap.add_argument("--calls", required=True, help="api/libs/LIB.calls")
    ap.add_argument("--exports-list", required=True, help="guest-lib/exports/LIB.so.N.exports")
    ap.add_argument("--out", required=True, help="the generated sources' folder (LIB/ is made in it)")
    o = ap.parse_args()
    generate(o.lib, LIBS[o.lib], o.include, o.calls, o.exports_list, o.out)


if __name__ == "__main__":
    main()
