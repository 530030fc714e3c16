"""PyTorch through vmcuda, step by step (issue 12 point 6).

Each step runs on its own and prints one line: `STEP name: ok <digest>` or
`STEP name: FAIL <error>`; a failed step does not stop the next. The digests are
deterministic, so the native run's lines and vmcuda's can be compared as text
(scripts/gpu-torch-check.sh). Run natively, then with vmcuda's libraries in place of the
host's driver.
"""
import hashlib
import sys
import time
import traceback


def digest(t):
    import torch
    return hashlib.sha256(t.detach().float().cpu().contiguous().numpy().tobytes()).hexdigest()[:16]


ONLY = None  # --step NAME: run that step alone (the check runs each in its own process, so
              # a step that kills the process does not hide the ones after it)


def step(name, fn):
    if ONLY is not None and name != ONLY:
        return
    t0 = time.time()
    try:
        result = fn()
        print(f"STEP {name}: ok {result}", flush=True)
    except Exception as e:  # noqa: BLE001 - every failure is reported, the next step runs
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        print(f"STEP {name}: FAIL {type(e).__name__}: {msg[:300]}", flush=True)
        traceback.print_exc(file=sys.stderr)
    print(f"  ({name}: {time.time() - t0:.2f} s; {loaded_libraries()})", file=sys.stderr, flush=True)


def loaded_libraries():
    """Which copy of each CUDA library the step ran on (vmcuda's, preloaded, or NVIDIA's)."""
    import re
    seen = {}
    with open("/proc/self/maps") as maps:
        for line in maps:
            m = re.search(r"(/\S*/)(lib(?:cuda|cudart|cublas|cublasLt|cudnn|cufft|curand|cusparse|cusolver)\.so[.\d]*)$",
                          line.strip())
            if m:
                dirs = seen.setdefault(m.group(2), [])
                if m.group(1) not in dirs:
                    dirs.append(m.group(1))  # a copy loaded by path beside the preloaded one shows too
    return " ".join(f"{lib} from {' and '.join(d)}" for lib, d in sorted(seen.items())) or "no CUDA library loaded"


def main():
    t0 = time.time()
    import torch
    print(f"  (import torch: {time.time() - t0:.2f} s)", file=sys.stderr, flush=True)
    step("available", lambda: torch.cuda.is_available())
    step("device_count", lambda: torch.cuda.device_count())
    step("device_name", lambda: torch.cuda.get_device_name(0))
    step("capability", lambda: torch.cuda.get_device_capability(0))
    step("mem_get_info", lambda: torch.cuda.mem_get_info()[1] > 0)

    def tensors():
        x = torch.arange(1 << 20, device="cuda", dtype=torch.float32)
        return digest(x * 2 + 1)
    step("tensors", tensors)

    def reductions():
        x = torch.arange(1 << 20, device="cuda", dtype=torch.float64)
        return f"{x.sum().item():.1f} {x.max().item():.1f} {x.mean().item():.3f}"
    step("reductions", reductions)

    def rng():
        g = torch.Generator(device="cuda").manual_seed(1234)
        return digest(torch.rand(4096, device="cuda", generator=g))
    step("random", rng)

    def matmul32():
        g = torch.Generator(device="cuda").manual_seed(1)
        a = torch.randn(512, 512, device="cuda", generator=g)
        b = torch.randn(512, 512, device="cuda", generator=g)
        torch.backends.cuda.matmul.allow_tf32 = False
        return f"{(a @ b).double().sum().item():.6e}"
    step("matmul_fp32", matmul32)

    def matmul_bf16():
        g = torch.Generator(device="cuda").manual_seed(2)
        a = torch.randn(1024, 1024, device="cuda", generator=g).bfloat16()
        b = torch.randn(1024, 1024, device="cuda", generator=g).bfloat16()
        return f"{(a @ b).double().sum().item():.6e}"
    step("matmul_bf16", matmul_bf16)

    def conv():
        torch.backends.cudnn.deterministic = True
        torch.backends.cudnn.benchmark = False
        g = torch.Generator(device="cuda").manual_seed(3)
        x = torch.randn(8, 3, 64, 64, device="cuda", generator=g)
        w = torch.randn(16, 3, 3, 3, device="cuda", generator=g)
        return f"{torch.nn.functional.conv2d(x, w, padding=1).double().sum().item():.6e}"
    step("conv2d", conv)

    def batchnorm():
        # BatchNorm2d in train mode with cuDNN enabled: PyTorch's cuDNN batch norm (legacy API:
        # tensor descriptors, cudnnBatchNormalizationForwardTrainingEx and BackwardEx). The sums
        # are printed with modest precision: the reductions' order is the library's.
        torch.backends.cudnn.enabled = True
        g = torch.Generator(device="cuda").manual_seed(5)
        bn = torch.nn.BatchNorm2d(6).cuda().train()
        with torch.no_grad():
            bn.weight.copy_(torch.rand(6, device="cuda", generator=g) + 0.5)
            bn.bias.copy_(torch.rand(6, device="cuda", generator=g) - 0.5)
        x = (torch.randn(4, 6, 10, 10, device="cuda", generator=g) * 2 + 1).requires_grad_()
        y = bn(x)
        (y * torch.linspace(-1, 1, y.numel(), device="cuda").view_as(y)).sum().backward()
        torch.cuda.synchronize()
        parts = [(y * y).sum(), x.grad.abs().sum(), bn.weight.grad.abs().sum(), bn.bias.grad.abs().sum(),
                 bn.running_mean.sum(), bn.running_var.sum()]
        # PyTorch picks cuDNN's batch norm by its own rules: torch.cudnn_batch_norm (the op it
        # dispatches to) runs it for certain, forward and backward.
        if hasattr(torch, "cudnn_batch_norm"):
            x2 = x.detach().clone().requires_grad_()
            w2 = bn.weight.detach().clone().requires_grad_()
            rm, rv = torch.zeros(6, device="cuda"), torch.ones(6, device="cuda")
            out = torch.cudnn_batch_norm(x2, w2, bn.bias.detach(), rm, rv, True, 0.1, 1e-5)[0]
            (out * torch.linspace(1, -1, out.numel(), device="cuda").view_as(out)).sum().backward()
            torch.cuda.synchronize()
            parts += [out.abs().sum(), x2.grad.abs().sum(), w2.grad.abs().sum(), rv.sum()]
        return " ".join(f"{p.double().item():.4e}" for p in parts)
    step("batchnorm", batchnorm)

    def grid_sample():
        # affine_grid, then grid_sample (bilinear, zero padding, align_corners=True: PyTorch's
        # cuDNN spatial transformer sampler, cudnnSpatialTfSamplerForward/Backward), forward and
        # backward to x and theta; torch.cudnn_affine_grid_generator runs cuDNN's grid generator
        # (cudnnSpatialTfGridGeneratorForward/Backward) and torch.cudnn_grid_sampler the sampler
        # for certain. Sums with modest precision: the library's order of summing.
        torch.backends.cudnn.enabled = True
        g = torch.Generator(device="cuda").manual_seed(7)
        x = torch.randn(2, 3, 8, 9, device="cuda", generator=g).requires_grad_()
        base = torch.tensor([[0.9, 0.15, 0.05], [-0.1, 0.8, 0.1]], device="cuda").repeat(2, 1, 1)
        theta = (base + 0.05 * torch.randn(2, 2, 3, device="cuda", generator=g)).requires_grad_()
        grid = torch.nn.functional.affine_grid(theta, (2, 3, 6, 7), align_corners=True)
        y = torch.nn.functional.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True)
        (y * torch.linspace(-1, 1, y.numel(), device="cuda").view_as(y)).sum().backward()
        torch.cuda.synchronize()
        parts = [y.abs().sum(), x.grad.abs().sum(), theta.grad.abs().sum()]
        if hasattr(torch, "cudnn_affine_grid_generator") and hasattr(torch, "cudnn_grid_sampler"):
            t2 = theta.detach().clone().requires_grad_()
            x2 = x.detach().clone().requires_grad_()
            g2 = torch.cudnn_affine_grid_generator(t2, 2, 3, 6, 7)
            y2 = torch.cudnn_grid_sampler(x2, g2)
            (y2 * torch.linspace(1, -1, y2.numel(), device="cuda").view_as(y2)).sum().backward()
            torch.cuda.synchronize()
            parts += [g2.abs().sum(), y2.abs().sum(), x2.grad.abs().sum(), t2.grad.abs().sum()]
        return " ".join(f"{p.double().item():.4e}" for p in parts)
    step("grid_sample", grid_sample)

    def ctc_loss():
        # CTC loss where PyTorch picks cuDNN (LossCTC.cpp _use_cudnn_ctc_loss): blank 0, float32
        # log-probabilities (T, N, C) on the GPU, int32 concatenated targets on the CPU, every input
        # length T, target lengths below 256 and at most the input's: cudnnCTCLoss on host arrays.
        # torch._cudnn_ctc_loss runs it for certain (deterministic algorithm), and with int32
        # tensors of lengths on the GPU cudnnCTCLoss_v8 (device arrays); use_cudnn says whether
        # PyTorch's own choice was cuDNN.
        torch.backends.cudnn.enabled = True
        g = torch.Generator(device="cuda").manual_seed(8)
        T, N, C = 12, 3, 6
        logits = torch.randn(T, N, C, device="cuda", generator=g)
        lp = logits.log_softmax(2).detach().requires_grad_()
        targets = torch.tensor([1, 2, 3, 3, 4, 5, 1, 2, 2], dtype=torch.int32)
        target_lengths, input_lengths = [3, 4, 2], [T, T, T]
        use_cudnn = torch._use_cudnn_ctc_loss(lp, targets, input_lengths, target_lengths, 0)
        loss = torch.nn.functional.ctc_loss(lp, targets, input_lengths, target_lengths, blank=0, reduction="sum")
        loss.backward()
        torch.cuda.synchronize()
        parts = [loss, lp.grad.abs().sum()]
        costs, grad = torch._cudnn_ctc_loss(lp.detach(), targets, input_lengths, target_lengths, 0, True, False)
        torch.cuda.synchronize()
        parts += [costs.sum(), grad.abs().sum()]
        try:
            costs8, grad8 = torch._cudnn_ctc_loss(
                lp.detach(), targets.cuda(), torch.tensor(input_lengths, dtype=torch.int32, device="cuda"),
                torch.tensor(target_lengths, dtype=torch.int32, device="cuda"), 0, True, False)
            torch.cuda.synchronize()
            parts += [costs8.sum(), grad8.abs().sum()]
        except (RuntimeError, TypeError) as e:  # a PyTorch without the tensor form
            parts.append(type(e).__name__)
        return f"use_cudnn={use_cudnn} " + " ".join(p if isinstance(p, str) else f"{p.double().item():.4e}" for p in parts)
    step("ctc_loss", ctc_loss)

    def recurrent(cls):
        # nn.LSTM / nn.GRU on the GPU with cuDNN: PyTorch's cuDNN RNN (the v8 RNN API: RNN and RNN
        # data descriptors, cudnnGetRNNWeightParams over the flattened weights, cudnnRNNForward in
        # training mode, cudnnRNNBackwardData_v8 and BackwardWeights_v8), two layers, batch first,
        # initial states, forward and backward. Sums printed with modest precision (the library's
        # reduction order); TF32 off so they do not hang on the math mode.
        def run():
            torch.backends.cudnn.enabled = True
            torch.backends.cudnn.allow_tf32 = False
            torch.manual_seed(7)
            net = cls(input_size=10, hidden_size=16, num_layers=2, batch_first=True).cuda()
            g = torch.Generator(device="cuda").manual_seed(8)
            x = torch.randn(4, 12, 10, device="cuda", generator=g).requires_grad_()
            h0 = torch.randn(2, 4, 16, device="cuda", generator=g) * 0.5
            state = (h0, torch.randn(2, 4, 16, device="cuda", generator=g) * 0.5) if cls is torch.nn.LSTM else h0
            y, out_state = net(x, state)
            hn = out_state[0] if cls is torch.nn.LSTM else out_state
            loss = (y * torch.linspace(-1, 1, y.numel(), device="cuda").view_as(y)).sum() + hn.square().sum()
            loss.backward()
            torch.cuda.synchronize()
            parts = [y.abs().sum(), hn.abs().sum(), x.grad.abs().sum()] + [p.grad.abs().sum() for p in net.parameters()]
            return " ".join(f"{p.double().item():.4e}" for p in parts)
        return run
    step("lstm", recurrent(torch.nn.LSTM))
    step("gru", recurrent(torch.nn.GRU))

    def fft():
        x = torch.arange(4096, device="cuda", dtype=torch.float32)
        return f"{torch.fft.rfft(x).abs().double().sum().item():.6e}"
    step("fft", fft)

    def solve():
        g = torch.Generator(device="cuda").manual_seed(4)
        a = torch.randn(64, 64, device="cuda", generator=g, dtype=torch.float64) + 64 * torch.eye(64, device="cuda", dtype=torch.float64)
        b = torch.ones(64, 1, device="cuda", dtype=torch.float64)
        return f"{torch.linalg.solve(a, b).sum().item():.9e}"
    step("linalg_solve", solve)

    def graph():
        x = torch.ones(1024, device="cuda")
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            y = x * 2
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            y = x * 2 + 1
        x.fill_(3)
        g.replay()
        torch.cuda.synchronize()
        return f"{y.sum().item():.1f}"
    step("cuda_graph", graph)

    def train():
        torch.manual_seed(0)
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True, warn_only=True)
        model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).cuda()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        g = torch.Generator(device="cuda").manual_seed(5)
        x = torch.randn(256, 64, device="cuda", generator=g)
        t = torch.randint(0, 10, (256,), device="cuda", generator=g)
        loss = None
        for _ in range(100):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(x), t)
            loss.backward()
            opt.step()
        return f"{loss.item():.9e}"
    step("train_100_steps", train)

    def compiled():
        torch.manual_seed(0)
        m = torch.nn.Linear(32, 32).cuda()
        f = torch.compile(lambda x: torch.relu(m(x)) * 2)
        x = torch.ones(16, 32, device="cuda")
        return f"{f(x).double().sum().item():.6e}"
    step("torch_compile", compiled)

    def expandable():
        # Run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (gpu-torch-check.sh does; not
        # in --list): the caching allocator grows one segment per pool with the driver's virtual
        # memory calls (cuMemAddressReserve, cuMemCreate, cuMemMap, cuMemSetAccess; cuMemUnmap and
        # cuMemRelease as it shrinks). Tensors of growing sizes are made, filled, some freed, the
        # cache emptied (unmapping), then a matmul; the digest and what the allocator says it did.
        import os
        if "expandable_segments:True" not in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
            raise RuntimeError("run with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True")
        g = torch.Generator(device="cuda").manual_seed(6)
        kept, h = [], hashlib.sha256()
        for i in range(1, 25):
            t = torch.full((i * 256 * 1024,), float(i), device="cuda")  # 1 MiB .. 24 MiB of float32
            t += torch.rand(t.shape, device="cuda", generator=g)
            h.update(digest(t).encode())
            if i % 3 == 0:
                kept.append(t)
            del t
        torch.cuda.empty_cache()  # unmaps what no tensor holds
        small = [torch.arange(i, device="cuda", dtype=torch.float32) for i in range(1, 200)]
        h.update(digest(torch.cat(small)).encode())
        a = torch.randn(1024, 1024, device="cuda", generator=g)
        b = torch.randn(1024, 1024, device="cuda", generator=g)
        torch.backends.cuda.matmul.allow_tf32 = False
        h.update(f"{(a @ b).double().sum().item():.6e}".encode())
        h.update(digest(torch.cat([k[:1024] for k in kept])).encode())
        segments = torch.cuda.memory._snapshot()["segments"]
        expandable_on = bool(segments) and all(s.get("is_expandable", False) for s in segments)
        del kept, small, a, b
        torch.cuda.empty_cache()
        torch.cuda.synchronize()
        return f"{h.hexdigest()[:16]} expandable={expandable_on} segments={len(segments)}"
    import os
    if ONLY == "expandable_segments" or "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""):
        step("expandable_segments", expandable)  # a run of every step without the setting skips it


if __name__ == "__main__":
    if "--list" in sys.argv:
        print("available device_count device_name capability mem_get_info tensors reductions random matmul_fp32 "
              "matmul_bf16 conv2d batchnorm grid_sample ctc_loss lstm gru fft linalg_solve cuda_graph train_100_steps "
              "torch_compile")
        sys.exit(0)
    if "--step" in sys.argv:
        ONLY = sys.argv[sys.argv.index("--step") + 1]
    main()
