#!/usr/bin/env python3
"""Generates vmcuda's cuDNN remoting from NVIDIA's cuDNN 9 headers (issue 12 point 3).

As scripts/gen-cublas.py does for cuBLASLt (whose struct layout and file helpers it shares):
cuDNN's remoted calls are hand-written (descriptor handles, attribute elements typed at run time),
so this script gives each call of api/libs/cudnn.calls its wire structs, its calls.def line and
its host entry point, and gives vmcuda's libcudnn.so.9 NVIDIA's exports and version node, with a
logging stub for every export that is not remoted.

Inputs: cudnn_graph.h, cudnn_ops.h, cudnn_cnn.h, cudnn_adv.h (prototypes, cudnnStatus_t's names),
the export list of NVIDIA's libcudnn.so.9 (guest-lib/exports/libcudnn.so.9.exports, written by
`gen-cudnn.py --exports LIB`) and api/libs/cudnn.calls. Outputs, into OUT (run by CMake):

  vmcuda/api/cudnn_wire.h     one Args (and Reply) struct per remoted call (api namespace)
  vmcuda/api/cudnn_calls.def  their VMCUDA_CALL lines (included in calls.def's library block)
  cudnn_host_api.h            the host's table of libcudnn.so.9 entry points (ABI types)
  cudnn_status_names.inc      cudnnStatus_t's names (cudnnGetErrorString answers them)
  cudnn_table.cc              (libcuda.so.1) a weak stub per other export, __vmcuda_cudnn_table
  cudnn_forward.c, libcudnn.map
                              vmcuda's libcudnn.so.9: IFUNCs into that table, NVIDIA's version node
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys

_spec = importlib.util.spec_from_file_location("gen_cublas", os.path.join(os.path.dirname(__file__), "gen-cublas.py"))
gen_cublas = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(gen_cublas)
struct, write, header_note, strip = gen_cublas.struct, gen_cublas.write, gen_cublas.header_note, gen_cublas.strip

HEADERS = ("cudnn_graph.h", "cudnn_ops.h", "cudnn_cnn.h", "cudnn_adv.h")
SONAME, AREA = "libcudnn.so.9", (0x2600, 0x26FF)
HANDLE_TYPES = {"cudnnHandle_t", "cudnnBackendDescriptor_t"}
INT32 = {"int", "unsigned", "libraryPropertyType", "cudnnStatus_t"}
POINTEE_BYTES = {"int64_t": 8, "int": 4, "size_t": 8}
# Return types of the exports: the ABI type a stub returns and its value (not supported).
STUB_RETURNS = {"cudnnStatus_t": ("int", "3000"), "size_t": ("size_t", "0"), "void": ("void", None),
                "const char*": ("const char*", "\"\"")}
PROTO = re.compile(r"([A-Za-z_][\w ]*?\**)\s*CUDNNWINAPI\s+(\w+)\s*\(([^;{}]*?)\)\s*;")


def prototypes(text):
    """name -> (return type, [(base type, name, pointer depth)])"""
    out = {}
    for ret, name, params in PROTO.findall(strip(text)):
        ret = re.sub(r"\s+\*", "*", ret.replace("CUDNN_DEPRECATED", "").strip())
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


def read_calls(path):
    calls = []
    for line in open(path):
        line = line.split("#", 1)[0].split()
        if not line:
            continue
        number, name, rest = int(line[0], 16), line[1], line[2:]
        roles = dict(r.split("=", 1) for r in rest if "=" in r)
        calls.append((number, name, "waits" in rest, "launches" in rest, roles))
    numbers = [c[0] for c in calls]
    if len(set(numbers)) != len(numbers) or any(not AREA[0] <= n <= AREA[1] for n in numbers):
        sys.exit(f"gen-cudnn.py: call numbers must be unique and in {AREA[0]:#x}-{AREA[1]:#x}")
    return calls


def fields(fn, base, name, depth, role, enums):
    """(args fields, reply fields, host ABI type, whether bytes follow the Args) of one parameter."""
    if role and role.split(":")[0] in ("bytes", "outbytes", "inoutbytes"):
        return [], [], "void*", role.startswith(("bytes", "inoutbytes"))
    if role == "out":
        if depth != 1 or base not in POINTEE_BYTES:
            sys.exit(f"gen-cudnn.py: {fn}: the size of out {name} ({base}) is unknown")
        return [], [("uint8_t", f"{name}[8]", 8)], "void*", False
    if role:
        sys.exit(f"gen-cudnn.py: {fn}: unknown role {role} of {name}")
    if depth == 0:
        if base in HANDLE_TYPES or base == "cudaStream_t":
            return [("uint64_t", name, 8)], [], "void*", False
        if base in INT32 or base in enums:
            return [("int32_t", name, 4)], [], "int", False
        if base == "int64_t":
            return [("int64_t", name, 8)], [], "long long", False
        if base == "size_t":
            return [("uint64_t", name, 8)], [], "size_t", False
    elif depth == 1 and base in HANDLE_TYPES:  # a new guest-made handle
        return [("uint64_t", name, 8)], [], "void*", False
    sys.exit(f"gen-cudnn.py: {fn}: cannot pass {base}{'*' * depth} {name} (give it a role in cudnn.calls)")


def status_names(text):
    """cudnnStatus_t's names and values: the current names, and a deprecated one only where its
    value is its own (CUDNN_STATUS_INVALID_VALUE, 2001; NVIDIA's library names it), not an alias."""
    body = re.search(r"typedef enum \{(.*?)\}\s*cudnnStatus_t\s*;", strip(text), re.S).group(1)
    names = {}
    for m in re.finditer(r"(CUDNN_STATUS_\w+)\s*(CUDNN_DEPRECATED_ENUM)?\s*=\s*(\d+)", body):
        if not m.group(2) or int(m.group(3)) not in names:
            names[int(m.group(3))] = m.group(1)
    return sorted(names.items())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--include", help="the folder of NVIDIA's cudnn_graph.h")
    ap.add_argument("--calls", help="api/libs/cudnn.calls")
    ap.add_argument("--exports-list", help="guest-lib/exports/libcudnn.so.9.exports")
    ap.add_argument("--out")
    ap.add_argument("--exports", metavar="LIB", help="print LIB's exported functions (the export list)")
    o = ap.parse_args()
    if o.exports:
        dump = subprocess.run(["objdump", "-T", o.exports], check=True, capture_output=True, text=True).stdout
        names = sorted({l.split()[-1] for l in dump.splitlines() if " DF " in l and "*UND*" not in l})
        print(f"# Generated by scripts/gen-cudnn.py --exports from {os.path.basename(o.exports)}: every function")
        print(f"# NVIDIA's library exports (version node {SONAME}). Do not edit.")
        print("\n".join(names))
        return

    protos, enums, texts = {}, set(), {}
    for h in HEADERS:
        text = open(os.path.join(o.include, h)).read()
        texts[h] = text
        enums.update(re.findall(r"typedef\s+enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*;", strip(text)))
        protos.update(prototypes(text))
    exports = [l.strip() for l in open(o.exports_list) if l.strip() and not l.startswith("#")]
    calls = read_calls(o.calls)
    note = header_note([os.path.join(o.include, h) for h in HEADERS] + [o.calls, o.exports_list])
    note = note.replace("gen-cublas.py", "gen-cudnn.py")

    wire, defs, host_api = [], [], []
    for number, name, waits, launches, roles in calls:
        if name not in protos:
            sys.exit(f"gen-cudnn.py: {name} (cudnn.calls) is in none of {', '.join(HEADERS)}")
        ret, plist = protos[name]
        known = {n for _, n, _ in plist}
        for r, role in roles.items():
            if r != "ret" and r not in known:
                sys.exit(f"gen-cudnn.py: {name}: cudnn.calls names no parameter {r}")
            if ":" in role and role.split(":", 1)[1] not in known:
                sys.exit(f"gen-cudnn.py: {name}: {r}={role} names no parameter {role.split(':', 1)[1]}")
        args, reply, host, tail = [], [], [], False
        for base, n, depth in plist:
            a, r, h, t = fields(name, base, n, depth, roles.get(n), enums)
            args += a
            reply += r
            host.append(h)
            tail |= t
        if roles.get("ret") == "out":
            if ret != "size_t":
                sys.exit(f"gen-cudnn.py: {name}: ret=out of a {ret}")
            reply.append(("uint8_t", "ret[8]", 8))
        args_t = "Empty"  # no arguments (a struct of no bytes is none of C++'s)
        if args:
            s, _ = struct(f"{name}_Args", args)
            wire.append(s)
            args_t = f"{name}_Args"
        reply_t = "Empty"
        if reply:
            s, _ = struct(f"{name}_Reply", reply)
            wire.append(s)
            reply_t = f"{name}_Reply"
        flags = ([] if waits else ["kQueued"]) + (["kLaunches"] if launches else []) + (["kTail"] if tail else [])
        defs.append(f"VMCUDA_CALL({number:#06x}, {name}, {args_t}, {reply_t}, {' | '.join(flags) or '0'})")
        host_ret = {"cudnnStatus_t": "int", "size_t": "size_t", "void": "void"}.get(ret)
        if host_ret is None:
            sys.exit(f"gen-cudnn.py: {name}: cannot call a function returning {ret}")
        host_api.append(f"  X({name}, {host_ret} (*)({', '.join(host)}))")

    remoted = {c[1] for c in calls}
    missing = remoted - set(exports)
    if missing:
        sys.exit(f"gen-cudnn.py: not exported by NVIDIA's library: {sorted(missing)}")
    stubs, decls, refs, fwd, mapn = [], [], [], [], []
    for i, name in enumerate(exports):
        ret = protos.get(name, ("cudnnStatus_t", []))[0]
        rtype, rval = STUB_RETURNS.get(ret, ("int", "3000"))
        body = f"vmcuda::guest::cudnn::unsupported(\"{name}\", logged);"
        if name in remoted or name in HAND_WRITTEN:
            decls.append(f"extern \"C\" void {name}(void);")
        elif rval is None:
            stubs.append(f"extern \"C\" __attribute__((weak)) void {name}(void) {{ static std::atomic<bool> logged{{false}}; {body} }}")
        else:
            stubs.append(f"extern \"C\" __attribute__((weak)) {rtype} {name}(void) {{ static std::atomic<bool> logged{{false}}; "
                         f"{body} return {rval}; }}")
        refs.append(f"    reinterpret_cast<void (*)(void)>(&{name}),")
        fwd.append(f"VMCUDA_FORWARD({name}, {i})")
        mapn.append(f"    {name};")
    n = len(exports)
    version = dict(re.findall(r"#define CUDNN_(MAJOR|MINOR|PATCHLEVEL)\s+(\d+)",
                              open(os.path.join(o.include, "cudnn_version.h")).read()))
    names = status_names(texts["cudnn_graph.h"])

    write(os.path.join(o.out, "vmcuda/api/cudnn_wire.h"), f"""// {note}
// The wire structs of the cuDNN calls (api/libs/cudnn.calls): fixed-width fields, largest first,
// no padding. Handles and descriptors are guest handles; elements follow as cudnn_abi.h says.
#pragma once
#include <cstdint>
#include <type_traits>
namespace vmcuda::api {{
{chr(10).join(wire)}
}}  // namespace vmcuda::api
""")
    write(os.path.join(o.out, "vmcuda/api/cudnn_calls.def"), f"""// {note}
// cuDNN ({AREA[0]:#x}-{AREA[1]:#x}): api/libs/cudnn.calls. Included in calls.def's library block.
{chr(10).join(defs)}
""")
    host_api_text = " \\\n".join(host_api)
    write(os.path.join(o.out, "cudnn_host_api.h"), f"""// {note}
// The {SONAME} entry points the host calls (one per remoted call), with ABI types: handles,
// descriptors and pointers void*, enums int.
#pragma once
#include <cstddef>
#include <cstdint>
#define VMCUDA_CUDNN_FUNCTIONS(X) \\
{host_api_text}
""")
    status_text = "\n".join(f"X({v}, \"{nm}\")" for v, nm in names)
    write(os.path.join(o.out, "cudnn_status_names.inc"), f"""// {note}
// cudnnStatus_t's names (cudnn_graph.h; deprecated aliases of another value left out): X(value, name).
{status_text}
""")
    write(os.path.join(o.out, "cudnn_table.cc"), f"""// {note}
// A weak stub for each export of NVIDIA's {SONAME} that is not written in guest-lib/src/cudnn.cc,
// and the table vmcuda's {SONAME} forwards to.
#include <atomic>
#include <cstddef>

#pragma GCC diagnostic ignored "-Wmissing-attributes"

namespace vmcuda::guest::cudnn {{
void unsupported(const char* name, std::atomic<bool>& logged) noexcept;
// cudnn_version.h's version, which cudnnGetVersion answers when the host cannot be asked.
extern const int kHeaderVersion[3];
const int kHeaderVersion[3] = {{{version.get('MAJOR', 0)}, {version.get('MINOR', 0)}, {version.get('PATCHLEVEL', 0)}}};
}}  // namespace vmcuda::guest::cudnn

// Any argument list: the caller reads only the return register.
{chr(10).join(stubs)}

{chr(10).join(decls)}
extern "C" __attribute__((visibility("default"))) void (*const __vmcuda_cudnn_table[])(void) = {{
{chr(10).join(refs)}
}};
extern "C" __attribute__((visibility("default"))) const unsigned __vmcuda_cudnn_table_size = {n};
""")
    write(os.path.join(o.out, "cudnn_forward.c"), f"""/* {note}
   Each export of vmcuda's {SONAME} is an IFUNC bound to its implementation in libcuda.so.1
   (__vmcuda_cudnn_table, same order; libcuda.so.1 is its DT_NEEDED). */
extern void (*const __vmcuda_cudnn_table[])(void);
extern const unsigned __vmcuda_cudnn_table_size;

/* A libcuda.so.1 of another vmcuda build with a different list: refuse, rather than call the
   wrong function. {n} exports here. */
static void (*entry(unsigned i))(void) {{
  if (__vmcuda_cudnn_table_size != {n}) __builtin_trap();
  return __vmcuda_cudnn_table[i];
}}
#define VMCUDA_FORWARD(name, i) \\
  static void (*resolve_##name(void))(void) {{ return entry(i); }} \\
  void name(void) __attribute__((ifunc("resolve_" #name)));

{chr(10).join(fwd)}
""")
    write(os.path.join(o.out, "libcudnn.map"), f"""/* {note}
   NVIDIA's {SONAME} gives every export the version node {SONAME}. */
{SONAME} {{
  global:
{chr(10).join(mapn)}
  local:
    *;
}};
""")


# Exports guest-lib/src/cudnn.cc writes that are answered in the guest (not calls of cudnn.calls).
HAND_WRITTEN = {"cudnnGetStream", "cudnnGetProperty", "cudnnGetErrorString", "cudnnGetMaxDeviceVersion",
                "cudnnGraphVersionCheck", "cudnnOpsVersionCheck", "cudnnCnnVersionCheck", "cudnnAdvVersionCheck"}

if __name__ == "__main__":
    main()
