#!/usr/bin/env python3
"""Generates vmcuda's remoting of NVIDIA's handle-based libraries cuFFT and cuRAND from their
headers (issue 12 point 3), as scripts/gen-cublas.py does cuBLAS's (its helpers are shared).

Inputs: NVIDIA's headers (cufft.h + cufftXt.h, or curand.h), the export list of NVIDIA's
library (guest-lib/exports/, written by `gen-nvlib.py --exports LIB`) and the annotation table
api/libs/LIB.calls (what a header cannot say). Outputs, into OUT/LIB (run by CMake at build time):

  vmcuda/api/LIB_wire.h     one Args and one Reply struct per remoted call (api namespace)
  vmcuda/api/LIB_calls.def  their VMCUDA_CALL lines (included at the end of calls.def)
  LIB_host_api.h            the host's table of the real library's entry points (ABI types)
  LIB_host.cc               Session::on_<name> for each generated call
  LIB_guest.cc              (libcuda.so.1) each generated entry point
  LIB_table.cc              a weak stub for every other export, and __vmcuda_LIB_table
  LIB_forward.c, libLIB.map vmcuda's libLIB.so.N: IFUNCs into that table, NVIDIA's version node

Only plain values, the library's handle, device pointers, host outputs and short host arrays
are accepted: an annotated function with a parameter the script cannot classify is an error.
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys

_spec = importlib.util.spec_from_file_location("gen_cublas", os.path.join(os.path.dirname(__file__), "gen-cublas.py"))
_cublas = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_cublas)
strip, struct, header_note, write = _cublas.strip, _cublas.struct, _cublas.header_note, _cublas.write

# What differs between the libraries. handle: the type a call names an object by (by value);
# native: the host's C type of it; area: the call numbers; not_supported: a stub's status.
LIBS = {
    "cufft": dict(
        headers=["cufftXt.h", "cufft.h"], macro="CUFFTAPI", soname="libcufft.so.12", area=(0x2200, 0x22FF),
        handle="cufftHandle", native="int", guest_handle="int", not_supported=("CUFFT_NOT_SUPPORTED", 16),
        version="CUFFT_VER", Lib="Cufft"),
    "curand": dict(
        headers=["curand.h"], macro="CURANDAPI", soname="libcurand.so.10", area=(0x2300, 0x23FF),
        handle="curandGenerator_t", native="void*", guest_handle="curandGenerator_t",
        not_supported=("CURAND_STATUS_INTERNAL_ERROR", 999), version="CURAND_VER", Lib="Curand"),
}
ARRAY_MAX = 3  # host arrays (cuFFT's n/inembed/onembed): at most rank 3

# Types passed by value: wire field type, the host's ABI type, the guest's C type.
VALUES = {
    "int": ("int32_t", "int"), "unsigned int": ("uint32_t", "unsigned"), "unsigned": ("uint32_t", "unsigned"),
    "long long int": ("int64_t", "long long"), "long long": ("int64_t", "long long"),
    "unsigned long long": ("uint64_t", "unsigned long long"), "size_t": ("uint64_t", "size_t"),
    "float": ("float", "float"), "double": ("double", "double"),
}
ENUMS = {"cufftType", "cufftType_t", "cudaDataType", "cudaDataType_t", "libraryPropertyType", "curandRngType_t",
         "curandOrdering_t", "curandMethod_t", "cufftXtWorkAreaPolicy", "cufftProperty"}
OUT_BYTES = {"size_t": 8, "int": 4, "long long int": 8, "long long": 8}


def prototypes(path, macro):
    """name -> (return type, [(base type, name, pointer depth)])"""
    out = {}
    pat = re.compile(r"(\w+)\s+" + macro + r"\s+(\w+)\s*\(([^;{}]*?)\)\s*;")
    for ret, name, params in pat.findall(strip(open(path).read())):
        plist = []
        if params.strip() not in ("", "void"):
            for p in params.split(","):
                p = p.strip()
                arr = p.count("[]")
                p = p.replace("[]", "").strip()
                m = re.match(r"(.*?)(\w+)$", p)
                t, n = m.group(1).strip(), m.group(2)
                base = re.sub(r"\s+", " ", t.replace("*", " ").replace("const", " ")).strip()
                plist.append((base, n, t.count("*") + arr))
        out[name] = (ret, plist)
    return out


def read_calls(path, area, reasons=None):
    """The calls of a .calls file, its `local` names and (into `reasons`, where given) its
    `notcarried KEY TEXT` lines (gen-nvobj.py: why a resume could not replay a call)."""
    calls, local = [], []
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        if line[0] == "local":  # answered in the guest alone (no call number)
            local.append(line[1])
            continue
        if line[0] == "notcarried" and reasons is not None:
            if len(line) < 3 or line[1] in reasons:
                sys.exit(f"gen-nvlib.py: {path}: notcarried KEY TEXT, each KEY once")
            reasons[line[1]] = " ".join(line[2:])
            continue
        number, name, rest = int(line[0], 16), line[1], line[2:]
        flags = {r for r in rest if "=" not in r}
        roles = dict(r.split("=", 1) for r in rest if "=" in r)
        calls.append((number, name, flags, roles))
    numbers = [c[0] for c in calls]
    if len(set(numbers)) != len(numbers) or any(not area[0] <= n <= area[1] for n in numbers):
        sys.exit(f"gen-nvlib.py: {path}: call numbers must be unique and in {area[0]:#x}-{area[1]:#x}")
    return calls, local


class Param:
    def __init__(self, lib, fn, base, name, depth, role):
        self.base, self.name, self.depth, self.role = base, name, depth, role
        self.count = self.elem = None
        if depth == 0:
            if base == lib["handle"]:
                self.kind, self.wire, self.host, self.guest = "handle", "uint64_t", lib["native"], lib["guest_handle"]
            elif base == "cudaStream_t":
                self.kind, self.wire, self.host, self.guest = "stream", "uint64_t", "void*", "cudaStream_t"
            elif base in ENUMS:
                self.kind, self.wire, self.host, self.guest = "value", "int32_t", "int", "int"
            elif base in VALUES:
                self.kind = "value"
                self.wire, self.host = VALUES[base]
                self.guest = self.host
            else:
                sys.exit(f"gen-nvlib.py: {fn}: cannot pass {base} {name}")
            return
        if base == lib["handle"] and depth == 1:
            self.kind, self.wire, self.host = "newhandle", "uint64_t", lib["native"] + "*"
            self.guest = lib["guest_handle"] + "*"
            return
        role = role or "dev"
        self.guest = "void*"
        if role == "out":
            if depth != 1 or base not in OUT_BYTES:
                sys.exit(f"gen-nvlib.py: {fn}: the size of out {name} ({base}) is unknown")
            self.kind, self.bytes = "out", OUT_BYTES[base]
            self.host = VALUES[base][1] + "*"
            self.guest = self.host
        elif role.startswith("in:"):  # a host array of up to ARRAY_MAX values, count from a parameter
            if depth != 1 or base not in ("int", "long long int", "long long"):
                sys.exit(f"gen-nvlib.py: {fn}: host array {name} must be int* or long long*")
            self.kind, self.count = "array", role[3:]
            self.host = VALUES[base][1] + "*"
            self.guest = self.host
        elif role == "dev" or role.startswith("dev:"):
            self.kind, self.wire, self.host = "dev", "uint64_t", "void*"
            if ":" in role:  # dev:COUNT*ELEM: the memory the library writes, checked on the host
                self.count, elem = role[4:].split("*")
                self.elem = int(elem)
        else:
            sys.exit(f"gen-nvlib.py: {fn}: unknown role {role} of {name}")

    def arg_fields(self):
        if self.kind == "out":
            return []
        if self.kind == "array":
            return [("int64_t", f"{self.name}[{ARRAY_MAX}]", 8 * ARRAY_MAX), ("int32_t", f"{self.name}_given", 4)]
        size = 4 if self.wire in ("int32_t", "uint32_t", "float") else 8
        return [(self.wire, self.name, size)]

    def reply_fields(self):
        return [("uint64_t", self.name, 8)] if self.kind == "out" else []


def generate(libname, lib, include, calls_path, exports_path, out):
    headers = [os.path.join(include, h) for h in lib["headers"]]
    protos = {}
    for h in headers:
        protos.update(prototypes(h, lib["macro"]))
    text = "".join(open(h).read() for h in headers)
    version = dict(re.findall(r"#define " + lib["version"] + r"_(MAJOR|MINOR|PATCH)\s+(\d+)", text))
    exports = [l.strip() for l in open(exports_path) if l.strip() and not l.startswith("#")]
    calls, local = read_calls(calls_path, lib["area"])
    note = header_note(headers + [calls_path, exports_path]).replace("gen-cublas.py", "gen-nvlib.py")
    Lib, NS = lib["Lib"], libname

    wire, defs, host_api, host_cc, guest_cc, replays = [], [], [], [], [], []
    for number, name, flags, roles in calls:
        if name not in protos:
            sys.exit(f"gen-nvlib.py: {name} ({calls_path}) is not in {lib['headers']}")
        hand = "hand" in flags
        check = roles.pop("check", None)
        keep = roles.pop("note", None)
        ret, plist = protos[name]
        params = [Param(lib, name, b, n, d, roles.get(n)) for b, n, d in plist]
        known = {p.name for p in params}
        for r in roles:
            if r not in known:
                sys.exit(f"gen-nvlib.py: {name}: {calls_path} names no parameter {r}")
        for p in params:
            if p.count and not p.count.isdigit() and p.count not in known:
                sys.exit(f"gen-nvlib.py: {name}: {p.name}'s count names no parameter {p.count}")
        clash = known & {"a", "r", "req", "scope_", "h_", "a_", "s_", "reply_", "made_", "st_", "c_"}
        if clash:
            sys.exit(f"gen-nvlib.py: {name}: parameter names {sorted(clash)} clash with the generated code's")
        args_t, reply_t = f"{name}_Args", f"{name}_Reply"
        s, _ = struct(args_t, [f for p in params for f in p.arg_fields()])
        wire.append(s)
        rf = [f for p in params for f in p.reply_fields()]
        if rf:
            s, _ = struct(reply_t, rf)
            wire.append(s)
        else:
            reply_t = "Empty"
        waits = "wait" in flags or any(p.kind in ("out", "newhandle") for p in params)
        defs.append(f"VMCUDA_CALL({number:#06x}, {name}, {args_t}, {reply_t}, {'0' if waits else 'kQueued'})")
        host_api.append(f"  X({name}, int (*)({', '.join(p.host for p in params)}))")
        if hand:
            continue
        handles = [p for p in params if p.kind in ("handle", "newhandle")]
        if len(handles) > 1 or any(p.kind == "stream" for p in params):
            sys.exit(f"gen-nvlib.py: {name}: one handle and no stream in a generated call (else mark it hand)")
        h = handles[0] if handles else None

        # ---- host handler
        b = [f"int32_t Session::on_{name}(const api::{args_t}& a, api::{reply_t}& {'r' if rf else ''}, Request&) {{"]
        if h is not None and h.kind == "handle":
            b.append(f"  {Lib}Scope scope_(*this, a.{h.name}, \"{name}\");")
        else:
            b.append(f"  {Lib}Scope scope_(*this, \"{name}\");")
        b.append(f"  if (!scope_.ok() || !scope_.has(scope_.lib->{name})) return scope_.status();")
        if h is not None and h.kind == "newhandle":
            b.append(f"  if (!scope_.fresh(a.{h.name})) return guest_fault(\"{name}: a handle that is not new\");")
            b.append(f"  if (!scope_.charge()) return scope_.status();")
            b.append(f"  {lib['native']} made_{{}};")
        call_args = []
        replay_lines, replay_args, scratch = [], [], "0"
        for p in params:
            if p.kind == "handle":
                replay_args.append("*plan_")
            elif p.kind == "newhandle":
                replay_args.append("plan_")
            elif p.kind == "value":
                replay_args.append(f"a.{p.name}")
            elif p.kind == "out":
                replay_lines.append(f"      {p.host[:-1]} {p.name}_{{}};")
                replay_args.append(f"&{p.name}_")
            elif p.kind == "array":
                replay_lines.append(f"      {p.host[:-1]} {p.name}_[{ARRAY_MAX}]{{}};")
                replay_lines.append(f"      if (a.{p.name}_given && !{Lib}Scope::host_array(a.{p.name}, a.{p.count}, {p.name}_))"
                                    f" return {Lib}Traits::kInvalidSize;")
                replay_args.append(f"a.{p.name}_given ? {p.name}_ : nullptr")
            elif p.kind == "dev" and p.count and "replay" in flags:
                # An output a replay only needs for the object's sake (a generator's numbers):
                # written into the resume's scratch buffer, of {NS}_replay_scratch bytes.
                if scratch != "0":
                    sys.exit(f"gen-nvlib.py: {name}: one device output at most in a replayed call")
                replay_args.append("scratch_")
                scratch = f"uint64_t(a.{p.count}) > UINT64_MAX / {p.elem} ? UINT64_MAX : uint64_t(a.{p.count}) * {p.elem}"
            elif "replay" in flags:
                sys.exit(f"gen-nvlib.py: {name}: a {p.kind} parameter cannot be replayed")
        if "replay" in flags:
            replays.append((name, args_t, h is not None and h.kind == "newhandle", replay_lines, replay_args, scratch))
        for p in params:
            if p.kind == "handle":
                call_args.append("scope_.native()")
            elif p.kind == "newhandle":
                call_args.append("&made_")
            elif p.kind == "value":
                call_args.append(f"a.{p.name}")
            elif p.kind == "dev":
                if p.count:
                    b.append(f"  if (!scope_.device(a.{p.name}, a.{p.count}, {p.elem})) return scope_.bad_pointer(\"{p.name}\");")
                else:
                    b.append(f"  if (!scope_.device(a.{p.name}, 1, 1)) return scope_.bad_pointer(\"{p.name}\");")
                call_args.append(f"reinterpret_cast<void*>(a.{p.name})")
            elif p.kind == "out":
                b.append(f"  {p.host[:-1]} {p.name}_{{}};")
                call_args.append(f"&{p.name}_")
            elif p.kind == "array":
                t = p.host[:-1]
                b.append(f"  {t} {p.name}_[{ARRAY_MAX}]{{}};")
                b.append(f"  if (a.{p.name}_given && !scope_.host_array(a.{p.name}, a.{p.count}, {p.name}_))"
                         f" return scope_.bad_array(\"{p.name}\");")
                call_args.append(f"a.{p.name}_given ? {p.name}_ : nullptr")
        b.append(f"  const int st_ = scope_.lib->{name}({', '.join(call_args)});")
        for p in params:
            if p.kind == "out":
                b.append(f"  r.{p.name} = static_cast<uint64_t>({p.name}_);")
        if h is not None and h.kind == "newhandle":
            b.append(f"  if (st_ == 0) scope_.adopt(a.{h.name}, made_);")
        if "replay" in flags:  # what a resume replays to make the object again
            b.append(f"  if (st_ == 0) scope_.record(api::Call::{name}, a);")
        b.append("  return st_;")
        b.append("}")
        host_cc.append("\n".join(b))

        # ---- guest entry point
        g = [f"VMCUDA_{Lib.upper()}_API int {name}({', '.join(f'{p.guest} {p.name}' for p in params)}) {{"]
        if h is not None and h.kind == "handle":
            g.append("  Handle* h_;")
            g.append(f"  if (int s_ = enter({h.name}, &h_)) return s_;")
        if h is not None and h.kind == "newhandle":
            g.append(f"  if (!{h.name}) return kInvalidValue;")
        for p in params:
            if p.kind == "out":
                g.append(f"  if (!{p.name}) return kInvalidValue;")
        if check:  # check=EXPR: the library's own argument check, a status (0: good), made before queuing
            g.append(f"  if (int s_ = {check}) return s_;")
        g.append(f"  api::{args_t} a_{{}};")
        if h is not None and h.kind == "newhandle":
            g.append("  auto made_ = make_handle();")
            g.append(f"  a_.{h.name} = made_->wire;")
        if keep:  # note=STATEMENT: what the guest keeps of the call (the new handle is made_, a handle h_)
            g.append(f"  {keep};")
        for p in params:
            if p.kind == "handle":
                g.append(f"  a_.{p.name} = h_->wire;")
            elif p.kind == "value":
                g.append(f"  a_.{p.name} = {p.name};")
            elif p.kind == "dev":
                g.append(f"  a_.{p.name} = device_pointer({p.name});")
            elif p.kind == "array":
                g.append(f"  if ({p.name}) {{")
                g.append(f"    a_.{p.name}_given = 1;")
                g.append(f"    for (long long c_ = 0; c_ < {p.count} && c_ < {ARRAY_MAX}; ++c_) a_.{p.name}[c_] = {p.name}[c_];")
                g.append("  }")
        if waits:
            g.append(f"  api::{reply_t} reply_{{}};")
            g.append(f"  const int s_ = wait<api::Call::{name}>(a_, &reply_);")
            for p in params:
                if p.kind == "out":
                    g.append(f"  if (s_ == kSuccess) *{p.name} = static_cast<{p.host[:-1]}>(reply_.{p.name});")
            if h is not None and h.kind == "newhandle":
                g.append(f"  if (s_ == kSuccess) publish(std::move(made_), {h.name});")
            g.append("  return s_;")
        else:
            if "hostout" in flags:  # a host generator's output (cuRAND: guest-lib/src/curand.h HostOutput)
                outs = [p for p in params if p.kind == "dev" and p.count]
                if len(outs) != 1 or h is None or h.kind != "handle":
                    sys.exit(f"gen-nvlib.py: {name}: hostout needs a handle and one dev:COUNT*ELEM output")
                o = outs[0]
                g.append("  if (h_->host) {")
                g.append(f"    HostOutput o_(h_, {o.name}, {o.count}, {o.elem});")
                g.append("    if (int s_ = o_.status()) return s_;")
                g.append(f"    a_.{o.name} = o_.scratch();")
                g.append("    api::Empty reply_{};")
                g.append(f"    return o_.copy_out(wait<api::Call::{name}>(a_, &reply_));")
                g.append("  }")
            g.append(f"  return queue<api::Call::{name}>(a_);")
        g.append("}")
        guest_cc.append("\n".join(g))

    implemented = {c[1] for c in calls} | set(local)
    missing = implemented - set(exports)
    if missing:
        sys.exit(f"gen-nvlib.py: not exported by NVIDIA's {lib['soname']}: {sorted(missing)}")
    nl = "\n"
    d = os.path.join(out, NS)
    write(os.path.join(d, f"vmcuda/api/{NS}_wire.h"), f"""// {note}
// The wire structs of the {NS} calls (api/libs/{NS}.calls): fixed-width fields, largest first,
// no padding. Handles are guest handles; pointers are device pointers or 0; a host array travels
// as up to {ARRAY_MAX} values (NAME_given 0: the app passed NULL).
#pragma once
#include <cstdint>
#include <type_traits>
namespace vmcuda::api {{
{nl.join(wire)}
}}  // namespace vmcuda::api
""")
    write(os.path.join(d, f"vmcuda/api/{NS}_calls.def"), f"""// {note}
// {NS} ({lib['area'][0]:#x}-{lib['area'][1]:#x}): api/libs/{NS}.calls. Included at the end of calls.def.
{nl.join(defs)}
""")
    write(os.path.join(d, f"{NS}_host_api.h"), f"""// {note}
// The {lib['soname']} entry points the host calls (one per remoted call), with ABI types.
#pragma once
#include <cstddef>
#define VMCUDA_{NS.upper()}_FUNCTIONS(X) \\
{(' ' + chr(92) + nl).join(host_api)}
""")
    cases = []
    scratches = []
    for name, args_t, makes, lines, args, scratch in replays:
        if scratch != "0":
            scratches.append("\n".join([
                f"    case static_cast<uint32_t>(api::Call::{name}): {{",
                f"      api::{args_t} a;",
                "      if (bytes.size() != sizeof a) return 0;",
                "      std::memcpy(&a, bytes.data(), sizeof a);",
                f"      return {scratch};",
                "    }"]))
        cases.append("\n".join([
            f"    case static_cast<uint32_t>(api::Call::{name}): {{",
            f"      api::{args_t} a;",
            f"      if (bytes.size() != sizeof a) return {Lib}Traits::kInvalidValue;",
            f"      if (!lib.{name}) return {Lib}Traits::kNotSupported;",
            "      std::memcpy(&a, bytes.data(), sizeof a);",
            *lines,
            f"      return lib.{name}({', '.join(args)});",
            "    }"]))
    makers = " || ".join(f"call == static_cast<uint32_t>(api::Call::{r[0]})" for r in replays if r[2]) or "false"
    replay_text = ""
    if replays:
        replay_text = f"""
// A resume (suspend.cc) replays each call recorded on an object (the `replay` calls of
// api/libs/{NS}.calls): *plan_ is the object, made by the first call when it is one that makes
// one ({NS}_replay_makes). The status of the library, kInvalidValue for bytes of another size.
bool {NS}_replay_makes(uint32_t call) {{ return {makers}; }}
bool {NS}_replayable(uint32_t call, size_t bytes) {{
  switch (call) {{
{nl.join(f"    case static_cast<uint32_t>(api::Call::{r[0]}): return bytes == sizeof(api::{r[1]});" for r in replays)}
  }}
  return false;
}}
// The device bytes a recorded call writes when replayed (into scratch_ of {NS}_replay).
uint64_t {NS}_replay_scratch(uint32_t call, [[maybe_unused]] std::span<const std::byte> bytes) {{
  switch (call) {{
{nl.join(scratches)}
  }}
  return 0;
}}
int {NS}_replay(const {Lib}Api& lib, {lib['native']}* plan_, uint32_t call, std::span<const std::byte> bytes,
                [[maybe_unused]] void* scratch_) {{
  switch (call) {{
{nl.join(cases)}
  }}
  return {Lib}Traits::kInvalidValue;
}}
"""
    write(os.path.join(d, f"{NS}_host.cc"), f"""// {note}
// The host handlers of the generated {NS} calls (hand-written helpers: host-stub/src/{NS}.h).
#include <cstring>
#include <span>

#include "{NS}.h"

namespace vmcuda::host {{

{(nl + nl).join(host_cc)}
{replay_text}
}}  // namespace vmcuda::host
""")
    write(os.path.join(d, f"{NS}_guest.cc"), f"""// {note}
// libcuda.so.1's generated {NS} entry points (helpers: guest-lib/src/{NS}.h).
#include "{NS}.h"

using namespace vmcuda::guest::{NS};
namespace api = vmcuda::api;

{(nl + nl).join(guest_cc)}
""")
    write_library(d, NS, lib["soname"], note, exports, implemented, lib["not_supported"], version)


def write_library(d, NS, soname, note, exports, implemented, not_supported, version):
    """The guest library's side of the remoting (gen-nvlib.py's and gen-nvobj.py's): in folder d,
    NS_table.cc (a weak stub logging once for each export not in `implemented`, the table
    vmcuda's library forwards to), NS_forward.c (the IFUNC forwarders) and libNS.map (NVIDIA's
    version node, named as the soname)."""
    ns_status, ns_value = not_supported
    n_exports = len(exports)
    stubs, decls, refs, fwd, mapn = [], [], [], [], []
    for i, name in enumerate(exports):
        if name in implemented:
            decls.append(f"extern \"C\" void {name}(void);")
        else:
            stubs.append(f"extern \"C\" __attribute__((weak)) int {name}(void) {{ static std::atomic<bool> logged{{false}}; "
                         f"vmcuda::guest::{NS}::unsupported(\"{name}\", logged); return {ns_value}; }}")
        refs.append(f"    reinterpret_cast<void (*)(void)>(&{name}),")
        fwd.append(f"VMCUDA_FORWARD({name}, {i})")
        mapn.append(f"    {name};")
    nl = "\n"
    write(os.path.join(d, f"{NS}_table.cc"), f"""// {note}
// A weak stub for each export of NVIDIA's {soname} that is neither generated ({NS}_guest.cc)
// nor hand-written (guest-lib/src/{NS}.cc), each answering {ns_status} ({ns_value}) and logging
// its name once, and the table vmcuda's {soname} forwards to.
#include <atomic>

#include "{NS}.h"

#pragma GCC diagnostic ignored "-Wmissing-attributes"

namespace vmcuda::guest::{NS} {{
const int kVersion[3] = {{{version.get('MAJOR', 0)}, {version.get('MINOR', 0)}, {version.get('PATCH', 0)}}};
}}

// Any argument list: the caller reads only the return register.
{nl.join(stubs)}

{nl.join(decls)}
extern "C" __attribute__((visibility("default"))) void (*const __vmcuda_{NS}_table[])(void) = {{
{nl.join(refs)}
}};
extern "C" __attribute__((visibility("default"))) const unsigned __vmcuda_{NS}_table_size = {n_exports};
""")
    write(os.path.join(d, f"{NS}_forward.c"), f"""/* {note}
   Each export of vmcuda's {soname} is an IFUNC bound to its implementation in
   libcuda.so.1 (__vmcuda_{NS}_table, same order; libcuda.so.1 is its DT_NEEDED). */
extern void (*const __vmcuda_{NS}_table[])(void);
extern const unsigned __vmcuda_{NS}_table_size;

/* A libcuda.so.1 of another vmcuda build with a different list: refuse, rather than call the
   wrong function. {n_exports} exports here. */
static void (*entry(unsigned i))(void) {{
  if (__vmcuda_{NS}_table_size != {n_exports}) __builtin_trap();
  return __vmcuda_{NS}_table[i];
}}
#define VMCUDA_FORWARD(name, i) \\
  static void (*resolve_##name(void))(void) {{ return entry(i); }} \\
  void name(void) __attribute__((ifunc("resolve_" #name)));

{nl.join(fwd)}
""")
    write(os.path.join(d, f"lib{NS}.map"), f"""/* {note}
   NVIDIA's {soname} gives every export the version node {soname}. */
{soname} {{
  global:
{nl.join(mapn)}
  local:
    *;
}};
""")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", choices=sorted(LIBS))
    ap.add_argument("--include", help="the CUDA toolkit's include folder")
    ap.add_argument("--calls", help="api/libs/LIB.calls")
    ap.add_argument("--exports-list", help="guest-lib/exports/LIB.so.N.exports")
    ap.add_argument("--out", help="the generated sources' folder (LIB/ is made in it)")
    ap.add_argument("--exports", metavar="SO", help="print SO's exported functions (the export list)")
    o = ap.parse_args()
    if o.exports:
        dump = subprocess.run(["objdump", "-T", o.exports], check=True, capture_output=True, text=True).stdout
        names = sorted({l.split()[-1] for l in dump.splitlines() if " DF " in l and "*UND*" not in l})
        print(f"# Generated by scripts/gen-nvlib.py --exports from {os.path.basename(o.exports)}: every function")
        print("# NVIDIA's library exports. Do not edit.")
        print("\n".join(names))
        return
    generate(o.lib, LIBS[o.lib], o.include, o.calls, o.exports_list, o.out)


if __name__ == "__main__":
    main()
