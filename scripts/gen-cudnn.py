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
  cudnn_guest.inc, cudnn_host.inc
                              the calls not marked `hand` (the legacy API: tensor descriptors, batch
                              normalization...): guest entry points and host handlers, included at
                              the end of guest-lib/src/cudnn.cc and host-stub/src/cudnn.cc
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
# The legacy API's descriptors vmcuda remotes: guest-made handles as the backend's, each kind with
# its tag (the guest and the host keep it with the object, so one kind is never taken for another).
LEGACY_DESCRIPTORS = {"cudnnTensorDescriptor_t": 0, "cudnnActivationDescriptor_t": 1, "cudnnFilterDescriptor_t": 2,
                      "cudnnConvolutionDescriptor_t": 3, "cudnnPoolingDescriptor_t": 4, "cudnnDropoutDescriptor_t": 5,
                      "cudnnLRNDescriptor_t": 6, "cudnnOpTensorDescriptor_t": 7, "cudnnReduceTensorDescriptor_t": 8,
                      "cudnnSpatialTransformerDescriptor_t": 9, "cudnnCTCLossDescriptor_t": 10,
                      "cudnnRNNDescriptor_t": 11, "cudnnRNNDataDescriptor_t": 12}
TENSOR_TAG, FILTER_TAG, RNN_DATA_TAG = 0, 2, 12
# The most elements of an array parameter (bytes:N, outbytes:N) one call carries: CUDNN_DIM_MAX.
MAX_ARRAY = 8
DOUBLE_TYPE = 1  # cudnnDataType_t CUDNN_DATA_DOUBLE: its scalars (alpha, beta) are doubles
INT32 = {"int", "unsigned", "int32_t", "uint32_t", "libraryPropertyType", "cudnnStatus_t"}
POINTEE_BYTES = {"int64_t": 8, "int": 4, "int32_t": 4, "uint32_t": 4, "size_t": 8, "unsigned": 4, "float": 4, "double": 8, "unsigned long long": 8,
                 # the algorithm searches' results (cudnn_cnn.h; 48 bytes each in cuDNN 9)
                 "cudnnConvolutionFwdAlgoPerf_t": 48, "cudnnConvolutionBwdDataAlgoPerf_t": 48,
                 "cudnnConvolutionBwdFilterAlgoPerf_t": 48}
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
        calls.append((number, name, "waits" in rest, "launches" in rest, roles, "hand" in rest, "records" in rest,
                      "arena" in rest))
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
    if depth == 0 and base in LEGACY_DESCRIPTORS:  # its wire handle
        return [("uint64_t", name, 8)], [], "void*", False
    if depth == 1 and base == "void":  # a device pointer
        return [("uint64_t", name, 8)], [], "void*", False
    sys.exit(f"gen-cudnn.py: {fn}: cannot pass {base}{'*' * depth} {name} (give it a role in cudnn.calls)")


class Param:
    """One parameter of a generated (not `hand`) call: its kind, wire fields and host ABI type."""

    def __init__(self, fn, base, name, depth, role, enums):
        self.name, self.base, self.size_param, self.bytes, self.tag = name, base, None, 0, None
        self.filled = None  # outbytes:N:M: out parameter M says how many the library filled
        self.max = MAX_ARRAY  # bytes:N:MAX: at most MAX elements
        self.fills = False  # a tensor descriptor the library sets (recorded as read back)
        self.per_sequence = None  # devints:D: one int32 per sequence of RNN data descriptor D
        self.element = self.optional = False
        self.out_tag = None  # outdesc: the legacy descriptor (of this tag) the library answers
        self.fill_type = None  # outfill:T: one value of data type T (an out parameter)
        if role and role.split(":")[0] in ("bytes", "outbytes"):
            self.kind, self.size_param, *filled = role.split(":")
            self.filled = filled[0] if filled else None
            if self.kind == "bytes" and self.filled:
                self.max, self.filled = int(self.filled), None
            elif len(filled) > 1:  # outbytes:N:M:MAX
                self.max = int(filled[1])
            if base not in POINTEE_BYTES or depth != 1:
                sys.exit(f"gen-cudnn.py: {fn}: the element size of {name} ({base}) is unknown")
            self.bytes = POINTEE_BYTES[base]
            self.args, self.reply, self.host = [], [], "void*"
            return
        self.optional = role == "optout"  # an out the app may pass NULL for (nothing is written)
        if role == "outdesc":  # a descriptor the library answers: the guest's handle of it comes back
            if depth != 1 or base not in LEGACY_DESCRIPTORS:
                sys.exit(f"gen-cudnn.py: {fn}: outdesc {name} is no legacy descriptor pointer")
            self.kind, self.bytes, self.out_tag = "out", 8, LEGACY_DESCRIPTORS[base]
            self.args, self.reply, self.host = [], [("uint8_t", f"{name}[8]", 8)], "void*"
            return
        if role and role.startswith("outfill:"):  # one value of data type T (an out) the app may not want
            if depth != 1 or base != "void":
                sys.exit(f"gen-cudnn.py: {fn}: outfill {name} is no void*")
            self.kind, self.bytes, self.optional, self.fill_type = "out", 8, True, role.split(":", 1)[1]
            self.args, self.reply, self.host = [], [("uint8_t", f"{name}[8]", 8)], "void*"
            return
        if role in ("out", "optout") or (role is None and depth == 1 and (base in enums) and fn.startswith("cudnnGet")):
            if depth == 2 and base == "void":  # a device pointer the library answers (a descriptor's)
                self.kind, self.bytes = "out", 8
            elif depth != 1 or (base not in POINTEE_BYTES and base not in enums):
                sys.exit(f"gen-cudnn.py: {fn}: the size of out {name} ({base}) is unknown")
            else:
                self.kind, self.bytes = "out", POINTEE_BYTES.get(base, 4)
            self.args, self.reply, self.host = [], [("uint8_t", f"{name}[8]", 8)], "void*"
            if self.optional:  # whether the app asked: the library is handed NULL where it did not
                self.args = [("int32_t", f"{name}_wanted", 4)]
            return
        self.element = bool(role and role.startswith("element:"))  # one element of a tensor's type
        self.extent = None  # extent:F:D or extent:N (cudnn.calls): how far a device pointer is checked
        if role and role.startswith("extent:"):
            if depth != 1:
                sys.exit(f"gen-cudnn.py: {fn}: extent {name} is no pointer")
            self.kind, self.extent = "dev", role.split(":")[1:]
        elif role and role.startswith(("scalar:", "element:")):
            self.kind, self.size_param = "scalar", role.split(":", 1)[1]
        elif role and role.startswith("fill:"):  # a host value of data type T, or NULL
            if depth != 1 or base != "void":
                sys.exit(f"gen-cudnn.py: {fn}: fill {name} is no void*")
            self.kind, self.size_param = "fill", role.split(":", 1)[1]
            self.args, self.host, self.reply = [("uint8_t", f"{name}[8]", 8), ("int32_t", f"{name}_given", 4)], "void*", []
            return
        elif role and role.startswith("devints:"):
            if depth != 1 or base not in ("int32_t", "int"):
                sys.exit(f"gen-cudnn.py: {fn}: devints {name} is no int array")
            self.kind, self.per_sequence = "dev", role.split(":", 1)[1]
        elif role == "filled":
            if depth != 0 or LEGACY_DESCRIPTORS.get(base) != TENSOR_TAG:
                sys.exit(f"gen-cudnn.py: {fn}: filled {name} is no tensor descriptor")
            self.kind, self.fills = "ldesc", True
        elif role == "destroy":
            self.kind = "destroy"
        elif role:
            sys.exit(f"gen-cudnn.py: {fn}: unknown role {role} of {name}")
        elif depth == 0 and base == "cudnnHandle_t":
            self.kind = "handle"
        elif depth == 0 and base in LEGACY_DESCRIPTORS:
            self.kind = "ldesc"
        elif depth == 1 and base in LEGACY_DESCRIPTORS:
            self.kind = "create"
        elif depth == 1 and base == "void" and name.startswith(("alpha", "beta")):
            self.kind, self.size_param = "scalar", "xDesc"  # float, or double for double data
        elif depth == 1 and base == "void":
            self.kind = "dev"
        elif depth == 0 and (base in INT32 or base in enums):
            self.kind, self.args, self.host = "value", [("int32_t", name, 4)], "int"
        elif depth == 0 and base in ("double", "int64_t", "size_t", "unsigned long long"):
            wire = {"double": "double", "int64_t": "int64_t", "size_t": "uint64_t", "unsigned long long": "uint64_t"}[base]
            self.kind, self.args = "value", [(wire, name, 8)]
            self.host = {"double": "double", "int64_t": "long long", "size_t": "size_t",
                         "unsigned long long": "unsigned long long"}[base]
        elif depth == 0 and base == "float":
            self.kind, self.args, self.host = "value", [("float", name, 4)], "float"
        else:
            sys.exit(f"gen-cudnn.py: {fn}: cannot pass {base}{'*' * depth} {name} (give it a role in cudnn.calls)")
        if self.kind in ("handle", "ldesc", "create", "destroy", "dev"):
            self.args, self.host = [("uint64_t", name, 8)], "void*"
            if base in LEGACY_DESCRIPTORS:
                self.tag = LEGACY_DESCRIPTORS[base]
        if self.kind == "dev" and self.extent and len(self.extent) == 2:
            self.size_param = self.extent[1]
        if self.kind == "scalar":
            self.args, self.host = [("uint8_t", f"{name}[8]", 8)], "void*"
        self.reply = []


def generated_call(number, name, roles, waits_flag, launches, plist, enums, records=False, arena=False):
    """(wire structs, calls.def line, host ABI list, host handler, guest entry point) of a call
    the generator writes both sides of. A call that `records` sets its first parameter, a legacy
    descriptor: the host keeps its arguments with the descriptor for a resume to replay. An
    `arena` call (an algorithm search that allocates its own memory) runs as its Ex form on
    memory the host takes from the client's arena (Session::cudnn_find_in_arena)."""
    params = [Param(name, b, n, d, roles.get(n), enums) for b, n, d in plist]
    known = {p.name: p for p in params}
    clash = set(known) & {"a", "r", "req", "lib", "st_", "a_", "o_", "s_", "reply_", "tail_", "extra_", "device_"}
    if clash:
        sys.exit(f"gen-cudnn.py: {name}: parameter names {sorted(clash)} clash with the generated code's")
    for p in params:
        if p.size_param and (p.size_param not in known or known[p.size_param].kind not in ("value", "ldesc")):
            sys.exit(f"gen-cudnn.py: {name}: {p.kind} {p.name} names no parameter {p.size_param}")
        if p.per_sequence and (p.per_sequence not in known or known[p.per_sequence].tag != RNN_DATA_TAG):
            sys.exit(f"gen-cudnn.py: {name}: devints {p.name} names no RNN data descriptor {p.per_sequence}")
        if p.filled and (p.filled not in known or known[p.filled].kind != "out"):
            sys.exit(f"gen-cudnn.py: {name}: {p.name}'s filled count {p.filled} is no out parameter")
    creates = [p for p in params if p.kind == "create"]
    destroys = [p for p in params if p.kind == "destroy"]
    if len(creates) + len(destroys) > 1 or ((creates or destroys) and len(params) != 1):
        sys.exit(f"gen-cudnn.py: {name}: a create or destroy call takes its descriptor alone")
    outs = [p for p in params if p.kind in ("out", "outbytes")]
    tails = [p for p in params if p.kind == "bytes"]
    if records:
        RECORD_TAIL_BYTES[name] = sum(p.max * p.bytes for p in tails)
    waits = bool(outs) or waits_flag
    if records and (not params or params[0].kind != "ldesc" or outs):
        sys.exit(f"gen-cudnn.py: {name}: a call that records sets its first parameter, a legacy descriptor")
    wire = []
    args_t, reply_t = "Empty", "Empty"
    af = [f for p in params for f in p.args]
    if af:
        wire.append(struct(f"{name}_Args", af)[0])
        args_t = f"{name}_Args"
    rf = [f for p in params for f in p.reply]
    if rf:
        wire.append(struct(f"{name}_Reply", rf)[0])
        reply_t = f"{name}_Reply"
    flags = ([] if waits else ["kQueued"]) + (["kLaunches"] if launches else []) + (["kTail"] if tails else [])
    define = f"VMCUDA_CALL({number:#06x}, {name}, {args_t}, {reply_t}, {' | '.join(flags) or '0'})"
    host_abi = f"  X({name}, int (*)({', '.join(p.host for p in params)}))"
    handle = next((p for p in params if p.kind == "handle"), None)

    # ---- host handler (host-stub/src/cudnn.cc's helpers)
    A = "a" if af else ""
    R = "r" if rf else ""
    h = [f"int32_t Session::on_{name}(const api::{args_t}& {A}, api::{reply_t}& {R}, Request& req) {{",
         f"  [[maybe_unused]] static constexpr const char* kCall = \"{name}\";",
         "  VMCUDA_CUDNN_LIBRARY();",
         f"  if (!lib->{name}) return kCudnnNotSupported;"]
    if handle:
        h.append("  int device_ = current_;")
    call, post, late = [], [], []
    tail_off, extra_off = 0, 0
    for p in params:
        if p.kind == "handle":
            h.append(f"  CudnnObject* {p.name}_ = cudnn_object(vol_, a.{p.name}, true, &device_);")
            h.append(f"  if (!{p.name}_) return kCudnnBadParam;")
            call.append(f"{p.name}_->ptr")
        elif p.kind in ("ldesc", "destroy"):
            h.append(f"  CudnnObject* {p.name}_ = a.{p.name} ? cudnn_object(vol_, a.{p.name}, false, nullptr, {p.tag}) : nullptr;")
            h.append(f"  if (a.{p.name} && !{p.name}_) return bad(log_tag_, kCall, \"{p.name} is not the client's {p.base[5:-2]}\");")
            if p.kind == "destroy":
                h.append(f"  if (!{p.name}_) return kCudnnSuccess;  // NULL: nothing to do, as NVIDIA's")
            call.append(f"{p.name}_ ? {p.name}_->ptr : nullptr")
            if p.kind == "destroy":  # cudnn_release calls the library's destroy function
                h.append(f"  cudnn_release(*{p.name}_);")
                h.append(f"  vol_.remove(vol_.find(ObjectKind::Cudnn, a.{p.name})->id);")
                h.append("  const int32_t st_ = kCudnnSuccess;  // as NVIDIA's: freed whatever its state")
        elif p.kind == "create":
            h.append(f"  if (a.{p.name} < api::kFirstGuestHandle || vol_.find(ObjectKind::Cudnn, a.{p.name}))")
            h.append(f"    return guest_fault(\"{name}: a handle that is not new\");")
            h.append(f"  void* {p.name}_ = nullptr;")
            call.append(f"&{p.name}_")
            post.append("  if (st_ != kCudnnSuccess) return st_;")
            post.append("  CudnnObject o_;")
            post.append(f"  o_.ptr = {p.name}_;")
            post.append(f"  o_.legacy = {p.tag};")
            post.append(f"  vol_.add(ObjectKind::Cudnn, current_, a.{p.name}, vol_.context(current_)->id, std::move(o_));")
        elif p.kind == "value":
            call.append(f"a.{p.name}")
        elif p.kind == "dev":
            # Its extent: the size parameter that follows it (workspace, reserve space), else the
            # tensor descriptor before it (the library's size of that tensor).
            i = params.index(p)
            nxt = params[i + 1] if i + 1 < len(params) else None
            desc = next((q for q in reversed(params[:i]) if q.kind == "ldesc" and q.tag in (TENSOR_TAG, RNN_DATA_TAG)), None)
            prev = params[i - 1] if i > 0 else None
            # The size parameter named after the pointer (weightSpace, dweightSpace: weightSpaceSize).
            def sizes(q, ptr):
                return q is not None and q.kind == "value" and q.base == "size_t" and \
                    q.name.lower().startswith(ptr.name.lower().removeprefix("d"))
            named = next((q for q in (prev, nxt) if sizes(q, p)), None)
            others = any(sizes(nxt, q) for q in params if q.kind == "dev" and q is not p)
            if p.extent and len(p.extent) == 1:
                extent = p.extent[0]
            elif p.extent and p.extent[0] == "bytes":  # a size parameter names it
                extent = f"std::max<uint64_t>(a.{p.extent[1]}, 1)"
            elif p.extent:
                extent = f"{p.extent[0]}({p.extent[1]}_)"
            elif p.per_sequence:
                extent = f"4 * rnn_data_batch({p.per_sequence}_)"
            elif named is not None:
                extent = f"std::max<uint64_t>(a.{named.name}, 1)"
            elif nxt is not None and nxt.kind == "value" and nxt.base == "size_t" and not others:
                extent = f"std::max<uint64_t>(a.{nxt.name}, 1)"
            elif prev is not None and prev.kind == "ldesc" and prev.tag == FILTER_TAG:
                extent = f"filter_bytes({prev.name}_)"  # a filter's data follows its descriptor
            elif prev is not None and prev.kind == "ldesc" and prev.tag in (TENSOR_TAG, RNN_DATA_TAG):
                extent = f"{'rnn_data' if prev.tag == RNN_DATA_TAG else 'tensor'}_bytes({prev.name}_)"
            elif desc is not None:
                extent = f"{'rnn_data' if desc.tag == RNN_DATA_TAG else 'tensor'}_bytes({desc.name}_)"
            else:
                extent = "1"
            check = [f"  if (a.{p.name} && !owns_range(a.{p.name}, {extent}))",
                     f"    return bad(log_tag_, kCall, \"{p.name} is not the client's device memory (or ends beyond it)\");"]
            if p.per_sequence or (p.extent and len(p.extent) > 1 and p.extent[0] != "bytes"):
                late += check  # after its descriptor is found
            else:
                h += check
            call.append(f"reinterpret_cast<void*>(a.{p.name})")
        elif p.kind == "scalar":
            call.append(f"const_cast<uint8_t*>(a.{p.name})")
        elif p.kind == "fill":
            call.append(f"a.{p.name}_given ? const_cast<uint8_t*>(a.{p.name}) : nullptr")
        elif p.kind == "out" and p.args:  # optout: NULL to the library where the app passed NULL
            call.append(f"a.{p.name}_wanted ? static_cast<void*>(r.{p.name}) : nullptr")
        elif p.kind == "out":
            call.append(f"r.{p.name}")
        elif p.kind == "bytes":
            n = f"a.{p.size_param}"
            h.append(f"  if ({n} < 0 || {n} > {p.max} || req.tail.size() < {tail_off} + size_t({n}) * {p.bytes})")
            h.append(f"    return guest_fault(\"{name}: {p.name}'s elements do not match {p.size_param}\");")
            h.append(f"  const size_t {p.name}_at = {tail_off};")
            h.append(f"  std::vector<std::byte> {p.name}_(req.tail.begin() + {p.name}_at, req.tail.begin() + {p.name}_at + size_t({n}) * {p.bytes});")
            call.append(f"{p.name}_.data()")
            tail_off = f"{p.name}_at + size_t({n}) * {p.bytes}"
        elif p.kind == "outbytes":
            n = f"a.{p.size_param}"
            h.append(f"  if ({n} > {p.max}) return guest_fault(\"{name}: more than {p.max} {p.name} elements\");")
            h.append(f"  const size_t {p.name}_n = size_t(std::max<int64_t>({n}, 0));")
            h.append(f"  const size_t {p.name}_at = {extra_off};")
            h.append(f"  if (req.extra.size() < {p.name}_at + {p.name}_n * {p.bytes}) return guest_fault(\"{name}: room for {p.name}\");")
            h.append(f"  std::vector<std::byte> {p.name}_({p.name}_n * {p.bytes} + 8);")
            call.append(f"{p.name}_.data()")
            post.append(f"  std::memcpy(req.extra.data() + {p.name}_at, {p.name}_.data(), {p.name}_n * {p.bytes});")
            extra_off = f"{p.name}_at + {p.name}_n * {p.bytes}"
    h += late
    if tails:
        h.append(f"  if (req.tail.size() != {tail_off}) return guest_fault(\"{name}: trailing bytes\");")
    if handle:
        h.append("  make_current(device_);")
    if launches:
        h.append(f"  count_launch(device_, cudnn_stream(*{handle.name}_), req.ctx);  // kLaunches: fair sharing, the kernel time limit")
    if arena:
        if not handle or not launches:
            sys.exit(f"gen-cudnn.py: {name}: an arena call is a search on a handle that launches")
        h.append(f"  const int st_ = cudnn_find_in_arena(device_, api::Call::{name}, {', '.join(call)});")
    elif not destroys:
        h.append(f"  const int st_ = lib->{name}({', '.join(call)});")
    if handle:
        h.append("  make_current(current_);")
    for p in params:
        if p.out_tag is not None:  # the library's descriptor answered as the guest's handle of it
            h.append(f"  if (st_ == kCudnnSuccess) cudnn_answer_guest_handle(r.{p.name}, {p.out_tag});")
        if p.fills:  # the shape the library gave it, kept as a setting of its own
            h.append(f"  if (st_ == kCudnnSuccess && {p.name}_) cudnn_note_filled_tensor(*{p.name}_, a.{p.name});")
    if records:  # what a resume replays (host-stub/src/cudnn.cc)
        h.append(f"  if (st_ == kCudnnSuccess) cudnn_note_legacy(*{params[0].name}_, call_number(api::Call::{name}), &a, sizeof a, req.tail);")
    if [p for p in params if p.kind == "outbytes"]:
        post.insert(0, "  if (st_ != kCudnnSuccess) return st_;")
        post.append(f"  req.extra_bytes = static_cast<uint32_t>({extra_off});")
    h += post
    h.append("  return st_;")
    h.append("}")
    if not tails and "req.tail" not in "\n".join(h) and "req." not in "\n".join(h):
        h[0] = h[0].replace("Request& req", "Request&")

    # ---- guest entry point (guest-lib/src/cudnn.cc's helpers)
    sig = []
    for p in params:
        sig.append(f"{p.host} {p.name}")
    g = [f"VMCUDA_CUDNN_API int {name}({', '.join(sig)}) {{"]
    if af:
        g.append(f"  api::{args_t} a_{{}};")
    tail_parts = []
    after = []
    out_sizes = {p.size_param for p in params if p.kind == "outbytes"}
    out_max = {p.size_param: p.max for p in params if p.kind == "outbytes"}
    for p in params:
        if p.kind == "handle":
            g.append(f"  const Object* {p.name}_ = find({p.name}, Kind::kHandle);")
            g.append(f"  if (!{p.name}_) return kCudnnBadParam;")
            g.append(f"  a_.{p.name} = {p.name}_->wire;")
        elif p.kind == "ldesc":
            g.append(f"  if (int s_ = legacy_wire({p.name}, {p.tag}, &a_.{p.name})) return s_;")
        elif p.kind == "destroy":
            g.append(f"  if (!{p.name}) return kCudnnSuccess;  // as NVIDIA's: nothing to do")
            g.append(f"  if (!forget_legacy({p.name}, {p.tag}, &a_.{p.name})) return kCudnnBadParam;")
        elif p.kind == "create":
            g.append(f"  if (!{p.name}) return kCudnnBadParam;")
            g.append(f"  auto o_ = new_legacy({p.tag});")
            g.append(f"  a_.{p.name} = o_->wire;")
            after.append(f"  *static_cast<void**>({p.name}) = adopt(std::move(o_));")
        elif p.kind == "value" and p.name in out_sizes:
            # The library fills at most CUDNN_DIM_MAX elements (or the role's most): ask for no more.
            g.append(f"  a_.{p.name} = std::min({p.name}, {out_max[p.name]});")
        elif p.kind == "value":
            g.append(f"  a_.{p.name} = {p.name};")
        elif p.kind == "dev":
            g.append(f"  a_.{p.name} = reinterpret_cast<uint64_t>({p.name});")
        elif p.kind == "scalar":
            g.append(f"  if (!{p.name}) return kCudnnBadParam;")
            g.append(f"  std::memcpy(a_.{p.name}, {p.name}, {'element_bytes' if p.element else 'scalar_bytes'}({p.size_param}));")
        elif p.kind == "out" and not p.optional:
            g.append(f"  if (!{p.name}) return kCudnnBadParam;")
        elif p.kind == "out" and p.args:
            g.append(f"  a_.{p.name}_wanted = {p.name} != nullptr;")
        elif p.kind == "fill":
            g.append(f"  if ({p.name}) std::memcpy(a_.{p.name}, {p.name}, data_type_bytes({p.size_param}));")
            g.append(f"  a_.{p.name}_given = {p.name} != nullptr;")
        elif p.kind == "bytes":
            n = p.size_param
            g.append(f"  if ({n} < 0 || {n} > {p.max} || ({n} > 0 && !{p.name})) return kCudnnBadParam;")
            tail_parts.append(f"{{static_cast<const std::byte*>({p.name}), size_t({n}) * {p.bytes}}}")
        elif p.kind == "outbytes":
            n = p.size_param
            g.append(f"  if ({n} > 0 && !{p.name}) return kCudnnBadParam;")
    if tails:
        g.append(f"  const std::vector<std::byte> tail_ = concat({{{', '.join(tail_parts)}}});")
    tail_arg = "tail_" if tails else "{}"
    args_arg = "a_" if af else "api::Empty{}"
    if waits:
        obytes = [p for p in params if p.kind == "outbytes"]
        for sp in sorted(out_sizes):
            g.append(f"  const size_t {sp}_n = size_t(std::clamp({sp}, 0, {out_max[sp]}));")
        cap = " + ".join(f"{p.size_param}_n * {p.bytes}" for p in obytes) or "0"
        g.append(f"  api::{reply_t} reply_{{}};" if rf else "")
        g.append(f"  std::vector<std::byte> extra_({cap});")
        g.append(f"  size_t got_ = 0;")
        g.append(f"  if (int s_ = wait<api::Call::{name}>({args_arg}, {'&reply_' if rf else 'nullptr'}, {tail_arg}, "
                 f"extra_.data(), extra_.size(), &got_)) return s_;")
        for p in params:
            if p.kind == "out" and p.out_tag is not None:
                g.append(f"  if (int s_ = answer_legacy(reply_.{p.name}, {p.out_tag}, {p.name})) return s_;")
            elif p.kind == "out" and p.fill_type:
                g.append(f"  int32_t {p.name}_type = 0;")
                g.append(f"  std::memcpy(&{p.name}_type, reply_.{p.fill_type}, 4);")
                g.append(f"  if ({p.name}) std::memcpy({p.name}, reply_.{p.name}, data_type_bytes({p.name}_type));")
            elif p.kind == "out":
                g.append(f"  {'if (' + p.name + ') ' if p.optional else ''}std::memcpy({p.name}, reply_.{p.name}, {p.bytes});")
        off = "0"
        for p in obytes:
            nb = f"{p.size_param}_n * {p.bytes}"
            copy = nb
            # Every element asked for, as NVIDIA's writes them (zeros past those it filled: seen
            # on the H100 with cudnnGetRNNDataDescriptor); the host's buffer starts zeroed.
            g.append(f"  if ({p.name} && got_ >= {off} + {nb}) std::memcpy({p.name}, extra_.data() + {off}, {copy});")
            off = f"{off} + {nb}"
    else:
        g.append(f"  if (int s_ = queue<api::Call::{name}>({args_arg}, {tail_arg})) return s_;")
    g += after
    if params and params[0].kind == "ldesc" and params[0].tag == 0 and "dataType" in known and known["dataType"].kind == "value":
        g.append(f"  set_data_type({params[0].name}, dataType);  // the scalars of calls on it follow it")
    g.append("  return kCudnnSuccess;")
    g.append("}")
    g = [l for l in g if l]
    return wire, define, host_abi, "\n".join(h), "\n".join(g)


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
        enums.update(re.findall(r"typedef\s+enum\s*\w*\s*\{[^}]*\}\s*(\w+)\s*(?:CUDNN_DEPRECATED)?\s*;", strip(text)))
        protos.update(prototypes(text))
    exports = [l.strip() for l in open(o.exports_list) if l.strip() and not l.startswith("#")]
    calls = read_calls(o.calls)
    note = header_note([os.path.join(o.include, h) for h in HEADERS] + [o.calls, o.exports_list])
    note = note.replace("gen-cublas.py", "gen-cudnn.py")

    wire, defs, host_api, host_cc, guest_cc = [], [], [], [], []
    for number, name, waits, launches, roles, hand, records, arena in calls:
        if name not in protos:
            sys.exit(f"gen-cudnn.py: {name} (cudnn.calls) is in none of {', '.join(HEADERS)}")
        ret, plist = protos[name]
        if not hand:
            if ret != "cudnnStatus_t":
                sys.exit(f"gen-cudnn.py: {name}: a generated call returns a cudnnStatus_t")
            known = {n for _, n, _ in plist}
            for r in roles:
                if r not in known:
                    sys.exit(f"gen-cudnn.py: {name}: cudnn.calls names no parameter {r}")
            w, d, ha, hc, gc = generated_call(number, name, roles, waits, launches, plist, enums, records, arena)
            wire += w
            defs.append(d)
            host_api.append(ha)
            host_cc.append(hc)
            guest_cc.append(gc)
            continue
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
    destroyers = {LEGACY_DESCRIPTORS[protos[c[1]][1][0][0]]: c[1] for c in calls
                  if not c[5] and c[4].get(protos[c[1]][1][0][1] if protos[c[1]][1] else "") == "destroy"}
    legacy_destroy_text = " \\\n".join(f"  X({t}, {n})" for t, n in sorted(destroyers.items()))
    creators = {LEGACY_DESCRIPTORS[protos[c[1]][1][0][0]]: c[1] for c in calls
                if not c[5] and len(protos[c[1]][1]) == 1 and protos[c[1]][1][0][2] == 1
                and protos[c[1]][1][0][0] in LEGACY_DESCRIPTORS}
    legacy_create_text = " \\\n".join(f"  X({t}, {n})" for t, n in sorted(creators.items()))
    recorded = [(c[1], protos[c[1]][1][0][1], LEGACY_DESCRIPTORS[protos[c[1]][1][0][0]]) for c in calls if c[6]]
    legacy_records_text = " \\\n".join(f"  X({n}, {f}, {t})" for n, f, t in recorded)
    max_tail = max(RECORD_TAIL_BYTES.values(), default=0)
    write(os.path.join(o.out, "cudnn_host_api.h"), f"""// {note}
// The {SONAME} entry points the host calls (one per remoted call), with ABI types: handles,
// descriptors and pointers void*, enums int.
#pragma once
#include <cstddef>
#include <cstdint>
#define VMCUDA_CUDNN_FUNCTIONS(X) \\
{host_api_text}
// The legacy descriptors' kinds (tag, destroy function): what frees one at the client's teardown.
#define VMCUDA_CUDNN_LEGACY_DESTROY(X) \\
{legacy_destroy_text}
// (tag, create function): what makes one again at a resume.
#define VMCUDA_CUDNN_LEGACY_CREATE(X) \\
{legacy_create_text}
// The calls that set a legacy descriptor (call, its descriptor parameter, the descriptor's tag):
// kept with the descriptor (CudnnStep::kLegacy) for a resume to replay.
#define VMCUDA_CUDNN_LEGACY_RECORDS(X) \\
{legacy_records_text}
// The most trailing bytes (host arrays) one of those settings carries.
#define VMCUDA_CUDNN_LEGACY_MAX_TAIL {max_tail}
""")
    write(os.path.join(o.out, "cudnn_host.inc"), f"""// {note}
// The host handlers of the generated cuDNN calls (api/libs/cudnn.calls without `hand`), included
// at the end of host-stub/src/cudnn.cc (its helpers).
{(chr(10) + chr(10)).join(host_cc)}
""")
    write(os.path.join(o.out, "cudnn_guest.inc"), f"""// {note}
// libcuda.so.1's generated cuDNN entry points (api/libs/cudnn.calls without `hand`), included at
// the end of guest-lib/src/cudnn.cc (its helpers).
{(chr(10) + chr(10)).join(guest_cc)}
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


# The trailing bytes each recorded setting carries at most (generated_call fills it).
RECORD_TAIL_BYTES = {}

# Exports guest-lib/src/cudnn.cc writes that are answered in the guest (not calls of cudnn.calls).
HAND_WRITTEN = {"cudnnGetStream", "cudnnGetProperty", "cudnnGetErrorString", "cudnnGetMaxDeviceVersion",
                "cudnnGraphVersionCheck", "cudnnOpsVersionCheck", "cudnnCnnVersionCheck", "cudnnAdvVersionCheck"}

if __name__ == "__main__":
    main()
