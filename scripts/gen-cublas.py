#!/usr/bin/env python3
"""Generates vmcuda's cuBLAS and cuBLASLt remoting from NVIDIA's headers (issue 12 point 3).

`--lib cublas` (the default) reads cublas_api.h and api/libs/cublas.calls; `--lib cublasLt`
reads cublasLt.h and api/libs/cublasLt.calls and writes the same kinds of files with the prefix
cublasLt_ (libcublasLt.so.13, __vmcuda_cublasLt_table, calls 0x2100-0x21ff). Every cuBLASLt call
is `hand` (attribute bytes, descriptors, result arrays): the script gives it its wire structs,
its calls.def line, its host entry point and its export; guest-lib/src/cublaslt.cc and
host-stub/src/cublaslt.cc do the rest.

Inputs: NVIDIA's cublas_api.h (and cublas.h, cublasXt.h for the return types of the legacy
and Xt exports), the export list of NVIDIA's libcublas.so.13 (guest-lib/exports/, written by
`gen-cublas.py --exports LIB`) and the annotation table api/libs/cublas.calls (what a header
cannot say). Outputs, into OUT (run by CMake at build time):

  vmcuda/api/cublas_wire.h     one Args and one Reply struct per remoted call (api namespace)
  vmcuda/api/cublas_calls.def  their VMCUDA_CALL lines (included at the end of calls.def)
  cublas_host_api.h            the host's table of libcublas.so.13 entry points (ABI types)
  cublas_host.cc               Session::on_<name> for each generated call
  cublas_guest.cc              (libcuda.so.1) each generated entry point, a weak stub for every
                               other export, and __vmcuda_cublas_table
  cublas_forward.c, libcublas.map
                               vmcuda's libcublas.so.13: IFUNCs into that table, NVIDIA's
                               version node

Only types of plain values and pointers are accepted: an annotated function with a parameter
the script cannot classify is an error (say its role in cublas.calls), never a guess.
"""
import argparse
import hashlib
import os
import re
import subprocess
import sys

# Types passed by value. wire: the field's type; host: the ABI type the host calls with.
INT32 = {
    "int", "cublasOperation_t", "cublasFillMode_t", "cublasDiagType_t", "cublasSideMode_t",
    "cublasPointerMode_t", "cublasMath_t", "cublasAtomicsMode_t", "cublasGemmAlgo_t", "cudaDataType",
    "cudaDataType_t", "cublasComputeType_t", "libraryPropertyType", "cublasStatus_t",
    "cublasEmulationStrategy_t",
}
INT64 = {"int64_t", "long long int", "long long"}
# Pointee sizes of typed scalars and results.
POINTEE_BYTES = {
    "float": 4, "double": 8, "__half": 2, "__nv_bfloat16": 2, "cuComplex": 8, "cuDoubleComplex": 16,
    "int": 4, "int64_t": 8, "size_t": 8,
    # cuBLASLt's semi-opaque structs, copied as bytes (cublasLt.h: 8 x uint64_t; the
    # heuristic result: the algorithm, workspaceSize, state, wavesCount, reserved[4]).
    "cublasLtMatmulAlgo_t": 64, "cublasLtMatmulHeuristicResult_t": 96,
}
SCALAR_BYTES = 16  # the largest scalar (cuDoubleComplex): a scalar field's size on the wire

# The libraries: their header, call area, soname, and the names of what is written for them.
LIBS = {
    "cublas": dict(header="cublas_api.h", extra_headers=("cublas.h", "cublasXt.h"), area=(0x2000, 0x20FF),
                   soname="libcublas.so.13", prefix="cublas", macro="VMCUDA_CUBLAS_FUNCTIONS"),
    "cublasLt": dict(header="cublasLt.h", extra_headers=(), area=(0x2100, 0x21FF),
                     soname="libcublasLt.so.13", prefix="cublasLt", macro="VMCUDA_CUBLASLT_FUNCTIONS"),
}

# Functions NVIDIA's libcublas.so.13 exports but no header declares, which NVIDIA's own libraries
# import (cuSOLVER calls cublasSetEnvironmentMode). Their prototypes as read from the library's
# code (CUDA 13.0: the handle, then a mode that must be 0 or 1, stored in the handle; the getter
# writes it to an int).
UNDECLARED = """
cublasStatus_t CUBLASWINAPI cublasSetEnvironmentMode(cublasHandle_t handle, int mode);
cublasStatus_t CUBLASWINAPI cublasGetEnvironmentMode(cublasHandle_t handle, int* mode);
"""
# Types of a header that are handles (pointers to opaque structs) and enums, read from it.
HANDLE_TYPES = {"cublasHandle_t"}
ENUM_TYPES = set()


def read_types(text):
    text = strip(text)
    HANDLE_TYPES.update(re.findall(r"typedef\s+(?:struct\s+)?\w+\s*\*\s*(\w+)\s*;", text))
    ENUM_TYPES.update(re.findall(r"typedef\s+enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*;", text))


def strip(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    text = "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("#"))
    return re.sub(r"\s+", " ", text)


PROTO = re.compile(r"([A-Za-z_][\w ]*?\**)\s*CUBLASWINAPI\s+(\w+)\s*\(([^;{}]*?)\)\s*;")


def prototypes(text):
    """name -> (return type, [(type, name, pointer depth, is_const_pointee)]) of a header's text"""
    out = {}
    for ret, name, params in PROTO.findall(strip(text)):
        ret = ret.replace("CUBLASAPI", "").strip()
        plist = []
        if params.strip() not in ("", "void"):
            for p in params.split(","):
                p = p.strip()
                arr = p.count("[]")
                p = p.replace("[]", "").strip()
                m = re.match(r"(.*?)(\w+)$", p)
                t, n = m.group(1).strip(), m.group(2)
                depth = t.count("*") + arr
                const_pointee = t.startswith("const ")
                base = t.replace("*", " ").replace("const", " ")
                base = re.sub(r"\s+", " ", base).strip()
                plist.append((base, n, depth, const_pointee))
        out[name] = (ret, plist)
    return out


def read_calls(path, area=(0x2000, 0x20FF)):
    calls = []
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        number, name, rest = int(line[0], 16), line[1], line[2:]
        hand = "hand" in rest
        roles = dict(r.split("=", 1) for r in rest if "=" in r)
        # waits: a hand-written call that answers before the app goes on (else it is queued)
        roles["waits"] = "waits" in rest
        # launches: a hand-written call that runs kernels (counted as a launch)
        roles["launches"] = "launches" in rest
        calls.append((number, name, hand, roles))
    numbers = [c[0] for c in calls]
    if len(set(numbers)) != len(numbers) or any(not area[0] <= n <= area[1] for n in numbers):
        sys.exit(f"gen-cublas.py: call numbers must be unique and in {area[0]:#x}-{area[1]:#x}")
    return calls


class Param:
    """One parameter of a remoted call: its wire field and how each side treats it."""

    def __init__(self, fn, base, name, depth, role):
        self.base, self.name, self.depth = base, name, depth
        self.kind = None
        self.size_param = None
        self.bytes = 0
        if depth == 0:
            if base in HANDLE_TYPES:
                self.kind, self.wire, self.host = "handle", "uint64_t", "void*"
            elif base == "cudaStream_t":
                self.kind, self.wire, self.host = "stream", "uint64_t", "void*"
            elif base in INT32 or base in ENUM_TYPES:
                self.kind, self.wire, self.host = "value", "int32_t", "int"
            elif base == "uint64_t":
                self.kind, self.wire, self.host = "value", "uint64_t", "unsigned long long"
            elif base in INT64:
                self.kind, self.wire, self.host = "value", "int64_t", "long long"
            elif base == "size_t":
                self.kind, self.wire, self.host = "value", "uint64_t", "size_t"
            elif base in ("float", "double"):
                self.kind, self.wire, self.host = "value", base, base
            else:
                sys.exit(f"gen-cublas.py: {fn}: cannot pass {base} {name} (give it a role in cublas.calls)")
            return
        self.host = "void*"
        if base in HANDLE_TYPES and depth == 1 and role is None:
            self.kind, self.wire = "newhandle", "uint64_t"
            return
        # Roles of hand-written calls: bytes:P (the pointee's P bytes follow the Args struct),
        # outbytes:P (up to P bytes come back in the reply's trailing bytes), struct:N (N bytes
        # copied into the Args, with has_NAME saying whether the pointer was NULL), inout:N (N
        # bytes copied into the Args and N bytes back in the Reply: a struct changed in place).
        if role and role.split(":")[0] in ("bytes", "outbytes"):
            self.kind, self.size_param, self.wire = role.split(":")[0], role.split(":", 1)[1], None
            return
        if role and role.startswith("struct:"):
            self.kind, self.bytes, self.wire = "struct", int(role.split(":", 1)[1]), "uint8_t"
            return
        if role and role.startswith("inout:"):
            self.kind, self.bytes, self.wire = "inout", int(role.split(":", 1)[1]), "uint8_t"
            return
        if role is None and name in ("alpha", "beta"):
            role = "scalar"
        role = role or "dev"
        if role.startswith("scalar"):
            self.kind, self.wire = "scalar", f"uint8_t"
            if ":" in role:
                self.size_param = role.split(":", 1)[1]
            elif base in POINTEE_BYTES and depth == 1:
                self.bytes = POINTEE_BYTES[base]
            else:
                sys.exit(f"gen-cublas.py: {fn}: the size of scalar {name} ({base}) is unknown: scalar:PARAM")
        elif role in ("result", "out"):
            if base not in POINTEE_BYTES or depth != 1:
                sys.exit(f"gen-cublas.py: {fn}: the size of {role} {name} ({base}) is unknown")
            self.kind, self.bytes = role, POINTEE_BYTES[base]
            self.wire = "uint64_t"
        elif role == "dev":
            self.kind, self.wire = "dev", "uint64_t"
        else:
            sys.exit(f"gen-cublas.py: {fn}: unknown role {role} of {name}")

    def arg_fields(self):
        """(C type, field name, bytes) of the Args struct."""
        if self.kind == "scalar":
            return [("uint8_t", f"{self.name}[{SCALAR_BYTES}]", SCALAR_BYTES)]
        if self.kind in ("out", "bytes", "outbytes"):
            return []
        if self.kind == "struct":
            return [("uint8_t", f"{self.name}[{self.bytes}]", self.bytes), ("uint32_t", f"has_{self.name}", 4)]
        if self.kind == "inout":
            return [("uint8_t", f"{self.name}[{self.bytes}]", self.bytes)]
        size = 4 if self.wire in ("int32_t", "float") else 8
        return [(self.wire, self.name, size)]

    def reply_fields(self):
        # A result travels in the reply's trailing bytes (Request::extra): a queued call (pointer
        # mode device) has no reply, and a Reply struct would make the dispatcher refuse it.
        if self.kind == "out":
            return [("uint8_t", f"{self.name}[{max(8, self.bytes)}]", max(8, self.bytes))]
        if self.kind == "inout":
            return [("uint8_t", f"{self.name}[{self.bytes}]", self.bytes)]
        return []


def struct(name, fields):
    """A struct with its fields largest first (no padding), its size a multiple of 8."""
    fields = sorted(fields, key=lambda f: -min(f[2], 8))
    size = sum(f[2] for f in fields)
    lines = [f"struct {name} {{"]
    for t, n, _ in fields:
        lines.append(f"  {t} {n}{'{}' if '[' not in n else '{}'};")
    pad = (-size) % 8
    if pad:
        lines.append(f"  uint8_t pad_[{pad}]{{}};")
        size += pad
    lines.append("};")
    lines.append(f"static_assert(sizeof({name}) == {size} && std::is_trivially_copyable_v<{name}>);")
    return "\n".join(lines), size


def header_note(sources):
    h = hashlib.sha256()
    for s in sources:
        h.update(open(s, "rb").read())
    return f"Generated by scripts/gen-cublas.py (inputs sha256 {h.hexdigest()[:16]}). Do not edit."


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if os.path.exists(path) and open(path).read() == text:
        return
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


STUB_RETURNS = {
    "cublasStatus_t": ("int", "15"), "cublasStatus": ("int", "15"), "void": ("void", None),
    "float": ("float", "0"), "double": ("double", "0"), "int": ("int", "0"), "size_t": ("size_t", "0"),
    "const char*": ("const char*", "\"\""),
    "cuComplex": ("vmcuda_cublas_complex", "{}"), "cuDoubleComplex": ("vmcuda_cublas_double_complex", "{}"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--include", help="the CUDA toolkit's include folder")
    ap.add_argument("--calls", help="api/libs/cublas.calls")
    ap.add_argument("--exports-list", help="guest-lib/exports/libcublas.so.13.exports")
    ap.add_argument("--out")
    ap.add_argument("--exports", metavar="LIB", help="print LIB's exported functions (the export list)")
    ap.add_argument("--lib", choices=sorted(LIBS), default="cublas", help="which library (default cublas)")
    o = ap.parse_args()
    if o.exports:
        dump = subprocess.run(["objdump", "-T", o.exports], check=True, capture_output=True, text=True).stdout
        names = sorted({l.split()[-1] for l in dump.splitlines() if " DF " in l and "*UND*" not in l})
        soname = os.path.basename(o.exports)
        print(f"# Generated by scripts/gen-cublas.py --exports from {soname}: every function")
        print(f"# NVIDIA's library exports (version node {soname}). Do not edit.")
        print("\n".join(names))
        return

    lib = LIBS[o.lib]
    P, soname = lib["prefix"], lib["soname"]
    api_h = os.path.join(o.include, lib["header"])
    protos = {}
    # The cuBLAS headers first (cuBLASLt's include cublas_api.h for its types), the library's
    # own header last: its types win.
    for h in ("cublas.h", "cublasXt.h", "cublas_api.h", lib["header"]):
        p = os.path.join(o.include, h)
        if os.path.exists(p) and (h == lib["header"] or h in lib["extra_headers"] or h == "cublas_api.h"):
            text = open(p).read()
            read_types(text)
            if h == lib["header"] or h in lib["extra_headers"]:
                protos.update(prototypes(text))
    if o.lib == "cublas":
        protos.update({k: v for k, v in prototypes(UNDECLARED).items() if k not in protos})
    version = {k: v for k, v in re.findall(r"#define CUBLAS_VER_(MAJOR|MINOR|PATCH)\s+(\d+)",
                                           open(os.path.join(o.include, "cublas_api.h")).read())}
    exports = [l.strip() for l in open(o.exports_list) if l.strip() and not l.startswith("#")]
    calls = read_calls(o.calls, lib["area"])
    note = header_note([api_h, o.calls, o.exports_list])

    wire, defs, host_api, host_cc, guest_cc = [], [], [], [], []
    for number, name, hand, roles in calls:
        if name not in protos:
            sys.exit(f"gen-cublas.py: {name} ({os.path.basename(o.calls)}) is not in {lib['header']}")
        ret, plist = protos[name]
        params = [Param(name, b, n, d, roles.get(n)) for b, n, d, _ in plist]
        # The generated code's own names (host: a, r, req, scope_; guest: *_) must not be parameters.
        clash = {p.name for p in params} & {"a", "r", "req", "scope_", "h_", "a_", "s_", "reply_", "bad_"}
        if clash:
            sys.exit(f"gen-cublas.py: {name}: parameter names {sorted(clash)} clash with the generated code's")
        known = {p.name for p in params}
        for p in params:
            if p.size_param and p.size_param not in known and not (hand and p.size_param == "desc"):
                sys.exit(f"gen-cublas.py: {name}: {p.kind} {p.name} names no parameter {p.size_param}")
        check = roles.pop("check", None)
        waits_hand = roles.pop("waits")
        launches_hand = roles.pop("launches")
        for r in roles:
            if r not in known:
                sys.exit(f"gen-cublas.py: {name}: cublas.calls names no parameter {r}")
        args_t, reply_t = f"{name}_Args", f"{name}_Reply"
        s, _ = struct(args_t, [f for p in params for f in p.arg_fields()])
        wire.append(s)
        rf = [f for p in params for f in p.reply_fields()]
        if rf:
            s, _ = struct(reply_t, rf)
            wire.append(s)
        else:
            reply_t = "Empty"
        waits = any(p.kind in ("out", "outbytes", "inout") for p in params) or waits_hand
        flags = "0" if waits else "kQueued"
        # Generated routines run kernels on the handle's stream, and so does a hand-written call
        # marked `launches`: kLaunches, and the handler counts the launch (Session::count_launch).
        launches = not hand or launches_hand
        if launches:
            flags = "kLaunches" if waits else "kQueued | kLaunches"
        if any(p.kind == "bytes" for p in params):
            flags += " | kTail"
        defs.append(f"VMCUDA_CALL({number:#06x}, {name}, {args_t}, {reply_t}, {flags})")
        host_sig = ", ".join(p.host for p in params)
        host_api.append(f"  X({name}, int (*)({host_sig}))")
        if hand:
            continue
        if not params or params[0].kind != "handle" or params[0].name != "handle":
            sys.exit(f"gen-cublas.py: {name}: generated calls take the handle first (else mark it hand)")

        # ---- host handler
        req = "req" if launches or any(p.kind == "result" for p in params) else ""
        b = [f"int32_t Session::on_{name}(const api::{args_t}& a, api::{reply_t}& r, Request& {req}) {{"]
        if reply_t == "Empty":
            b[0] = f"int32_t Session::on_{name}(const api::{args_t}& a, api::Empty&, Request& {req}) {{"
        b.append(f"  CublasScope scope_(*this, a.handle, \"{name}\");")
        b.append(f"  if (!scope_.ok() || !scope_.has(scope_.lib->{name})) return scope_.status();")
        call_args = []
        for p in params:
            if p.kind == "handle":
                call_args.append("scope_.handle->handle")
            elif p.kind == "value":
                call_args.append(f"a.{p.name}")
            elif p.kind == "dev":
                b.append(f"  if (!scope_.device(a.{p.name})) return scope_.bad_pointer(\"{p.name}\");")
                call_args.append(f"reinterpret_cast<void*>(a.{p.name})")
            elif p.kind == "scalar":
                size = f"cublas_scalar_bytes(a.{p.size_param})" if p.size_param else str(p.bytes)
                b.append(f"  const void* {p.name} = scope_.scalar(a.{p.name}, {size});")
                b.append(f"  if (!{p.name}) return scope_.bad_pointer(\"{p.name}\");")
                call_args.append(f"const_cast<void*>({p.name})")
            elif p.kind == "result":
                b.append(f"  void* {p.name} = scope_.result(a.{p.name}, req, {p.bytes});")
                b.append(f"  if (!{p.name}) return scope_.bad_pointer(\"{p.name}\");")
                call_args.append(p.name)
            elif p.kind == "out":
                call_args.append(f"r.{p.name}")
            else:
                sys.exit(f"gen-cublas.py: {name}: {p.kind} {p.name} needs a hand-written call (hand)")
        if launches:
            b.append("  scope_.launch(req.ctx);  // kLaunches: fair sharing, the kernel time limit")
        b.append(f"  return scope_.done(scope_.lib->{name}({', '.join(call_args)}));")
        b.append("}")
        host_cc.append("\n".join(b))

        # ---- guest entry point
        gsig = []
        for p in params:
            ctype = {"handle": "cublasHandle_t", "stream": "void*"}.get(p.kind)
            if ctype is None:
                ctype = p.host if p.kind == "value" else ("void*")
            gsig.append(f"{ctype} {p.name}")
        g = [f"VMCUDA_CUBLAS_API int {name}({', '.join(gsig)}) {{"]
        g.append("  Handle* h_;")
        g.append("  if (int s_ = enter(handle, &h_)) return s_;")
        if check:
            # check=HELPER(...)[&&NAME>=0...]: HELPER answers the first bad parameter's number as
            # cuBLAS reports it (0: none); each NAME>=0 term is numbered by its place in the
            # prototype, the handle not counted. NVIDIA's library prints that number before it
            # answers CUBLAS_STATUS_INVALID_VALUE, and so does this one.
            helper, *terms = check.split("&&")
            g.append(f"  int bad_ = {helper};")
            for t in terms:
                m = re.fullmatch(r"(\w+)>=0", t.strip())
                if not m or m.group(1) not in known:
                    sys.exit(f"gen-cublas.py: {name}: check term {t!r} is not PARAM>=0")
                number = [p.name for p in params].index(m.group(1))  # the handle is index 0
                g.append(f"  if (!bad_ && {m.group(1)} < 0) bad_ = {number};")
            routine = re.sub(r"_(v2|64)$", "", re.sub(r"_v2$", "", name[len("cublas"):])).upper()
            g.append(f"  if (bad_) return illegal_value(\"{routine}\", bad_);  // the call may be queued")
        g.append(f"  api::{args_t} a_{{}};")
        wait_expr = []
        for p in params:
            if p.kind == "handle":
                g.append("  a_.handle = h_->wire;")
            elif p.kind == "value":
                g.append(f"  a_.{p.name} = {p.name};")
            elif p.kind == "dev":
                g.append(f"  a_.{p.name} = device_pointer({p.name});")
            elif p.kind == "scalar":
                size = f"scalar_bytes({p.size_param})" if p.size_param else str(p.bytes)
                g.append(f"  if (int s_ = scalar(*h_, {p.name}, {size}, a_.{p.name})) return s_;")
            elif p.kind == "result":
                g.append(f"  if (!{p.name}) return kInvalidValue;")
                g.append(f"  if (h_->pointer_mode != kPointerModeHost) a_.{p.name} = device_pointer({p.name});")
                wait_expr.append("h_->pointer_mode == kPointerModeHost")
            elif p.kind == "out":
                g.append(f"  if (!{p.name}) return kInvalidValue;")
                wait_expr.append("true")
        outs = [p for p in params if p.kind in ("result", "out")]
        if outs:
            results = [p for p in outs if p.kind == "result"]
            if len(results) > 1:
                sys.exit(f"gen-cublas.py: {name}: one result per call")
            always = "true" in wait_expr  # an output in host memory: the call always waits
            g.append("  {" if always else f"  if ({' || '.join(wait_expr)}) {{")
            g.append(f"    api::{reply_t} reply_{{}};")
            if results:
                p = results[0]
                g.append(f"    const int s_ = wait<api::Call::{name}>(a_, &reply_, {p.name}, {p.bytes});")
            else:
                g.append(f"    const int s_ = wait<api::Call::{name}>(a_, &reply_, nullptr, 0);")
            for p in outs:
                if p.kind == "out":
                    g.append(f"    if (s_ == kSuccess) std::memcpy({p.name}, reply_.{p.name}, {p.bytes});")
            g.append("    return s_;")
            g.append("  }")
        if "kQueued" in flags:
            g.append(f"  return queue<api::Call::{name}>(a_);")
        g.append("}")
        guest_cc.append("\n".join(g))

    # ---- guest stubs for every other export, the table, the forwarders, the map
    stubs, decls, refs, fwd, mapn = [], [], [], [], []
    generated = {c[1] for c in calls if not c[2]}
    missing = generated - set(exports)
    if missing:
        sys.exit(f"gen-cublas.py: not exported by NVIDIA's library: {sorted(missing)}")
    for i, name in enumerate(exports):
        ret = protos.get(name, ("cublasStatus_t", []))[0]
        ret = re.sub(r"\s+\*", "*", ret)
        rtype, rval = STUB_RETURNS.get(ret, ("int", "15"))
        body = f"vmcuda::guest::cublas::unsupported(\"{name}\", logged);"
        if name in generated:
            pass
        elif rval is None:
            stubs.append(f"extern \"C\" __attribute__((weak)) void {name}(void) {{ static std::atomic<bool> logged{{false}}; {body} }}")
        else:
            stubs.append(f"extern \"C\" __attribute__((weak)) {rtype} {name}(void) {{ static std::atomic<bool> logged{{false}}; {body} return {rval}; }}")
        if name in generated:  # the stubs above are declared by their definitions
            decls.append(f"extern \"C\" void {name}(void);")
        refs.append(f"    reinterpret_cast<void (*)(void)>(&{name}),")
        fwd.append(f"VMCUDA_FORWARD({name}, {i})")
        mapn.append(f"    {name};")
    n = len(exports)

    host_api_text = " \\\n".join(host_api)
    version_text = ""
    if o.lib == "cublas":  # cublas_api.h's version, which both libraries' version calls answer
        version_text = ("namespace vmcuda::guest::cublas {\n"
                        f"const int kVersion[3] = {{{version.get('MAJOR', 0)}, {version.get('MINOR', 0)}, "
                        f"{version.get('PATCH', 0)}}};\n}}\n")
    guest_text = "\n\n".join(guest_cc)
    stub_text, decl_text, ref_text = "\n".join(stubs), "\n".join(decls), "\n".join(refs)
    write(os.path.join(o.out, f"vmcuda/api/{P}_wire.h"), f"""// {note}
// The wire structs of the {P} calls (api/libs/{P}.calls): fixed-width fields, largest
// first, no padding. Handles are guest handles; pointers are device pointers or 0; a scalar
// field holds the value (pointer mode host) or a device pointer in its first 8 bytes.
#pragma once
#include <cstdint>
#include <type_traits>
namespace vmcuda::api {{
{chr(10).join(wire)}
}}  // namespace vmcuda::api
""")
    write(os.path.join(o.out, f"vmcuda/api/{P}_calls.def"), f"""// {note}
// {P} ({lib["area"][0]:#x}-{lib["area"][1]:#x}): api/libs/{P}.calls. Included at the end of calls.def.
{chr(10).join(defs)}
""")
    write(os.path.join(o.out, f"{P}_host_api.h"), f"""// {note}
// The {soname} entry points the host calls (one per remoted call), with ABI types:
// handles and pointers void*, enums int.
#pragma once
#include <cstddef>
#include <cstdint>
#define {lib["macro"]}(X) \\
{host_api_text}
""")
    write(os.path.join(o.out, f"{P}_host.cc"), f"""// {note}
// The host handlers of the generated cuBLAS calls (hand-written helpers: host-stub/src/cublas.h).
#include "cublas.h"

namespace vmcuda::host {{

{(chr(10) + chr(10)).join(host_cc)}

}}  // namespace vmcuda::host
""")
    write(os.path.join(o.out, f"{P}_guest.cc"), f"""// {note}
// libcuda.so.1's generated cuBLAS entry points (helpers: guest-lib/src/cublas.h).
#include <cstring>

#include "cublas.h"

using namespace vmcuda::guest::cublas;
namespace api = vmcuda::api;

{guest_text}
""")
    write(os.path.join(o.out, f"{P}_table.cc"), f"""// {note}
// A weak stub for each export of NVIDIA's {soname} that is neither generated
// ({P}_guest.cc) nor hand-written (guest-lib/src/{P.lower()}.cc overrides some), and the table
// vmcuda's {soname} forwards to.
#include <atomic>
#include <cstddef>

#include "cublas.h"

#pragma GCC diagnostic ignored "-Wmissing-attributes"

{version_text}
struct vmcuda_cublas_complex {{ float x, y; }};
struct vmcuda_cublas_double_complex {{ double x, y; }};
// Any argument list: the caller reads only the return register.
{stub_text}

{decl_text}
extern "C" __attribute__((visibility("default"))) void (*const __vmcuda_{P}_table[])(void) = {{
{ref_text}
}};
extern "C" __attribute__((visibility("default"))) const unsigned __vmcuda_{P}_table_size = {n};
""")
    write(os.path.join(o.out, f"{P}_forward.c"), f"""/* {note}
   Each export of vmcuda's {soname} is an IFUNC bound to its implementation in
   libcuda.so.1 (__vmcuda_{P}_table, same order; libcuda.so.1 is its DT_NEEDED). */
extern void (*const __vmcuda_{P}_table[])(void);
extern const unsigned __vmcuda_{P}_table_size;

/* A libcuda.so.1 of another vmcuda build with a different list: refuse, rather than call the
   wrong function. {n} exports here. */
static void (*entry(unsigned i))(void) {{
  if (__vmcuda_{P}_table_size != {n}) __builtin_trap();
  return __vmcuda_{P}_table[i];
}}
#define VMCUDA_FORWARD(name, i) \\
  static void (*resolve_##name(void))(void) {{ return entry(i); }} \\
  void name(void) __attribute__((ifunc("resolve_" #name)));

{chr(10).join(fwd)}
""")
    write(os.path.join(o.out, f"lib{P}.map"), f"""/* {note}
   NVIDIA's {soname} gives every export the version node {soname}. */
{soname} {{
  global:
{chr(10).join(mapn)}
  local:
    *;
}};
""")


if __name__ == "__main__":
    main()
