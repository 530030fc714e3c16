"""PyTorch throughput through vmcuda (issue 12 point 8): run natively and through vmcuda in
one session by scripts/gpu-torch-bench.sh, which puts the two side by side.

Prints "name value unit" lines; a figure whose step fails prints "name nan unit" and the
error on stderr, so one failure does not hide the rest.
  --figure NAME   one figure only (the script runs each group in its own process)
"""
import sys
import time
import traceback

FIGURES = ["gemm", "train_small", "gpt2_small"]


def report(name, value, unit):
    print(f"{name} {value:.4g} {unit}", flush=True)


def timed_cuda(torch, fn, iters):
    """Seconds per call of fn after a warm-up, by the wall clock up to the GPU's last result
    (what a user waits for; CUDA events would leave out the host's share)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / iters


def gemm(torch):
    torch.backends.cuda.matmul.allow_tf32 = False
    for dtype, tag in ((torch.float32, "sgemm"), (torch.bfloat16, "bf16_gemm")):
        for n in (256, 1024, 8192):
            name = f"{tag}_{n}"
            try:
                a = torch.randn(n, n, device="cuda").to(dtype)
                b = torch.randn(n, n, device="cuda").to(dtype)
                # About half a second natively (at ~50 TFLOP/s), so that the queue's last flush
                # and the final synchronize are a small part of what is measured.
                iters = max(10, min(30000, int(0.5 * 50e12 / (2 * n**3))))
                s = timed_cuda(torch, lambda: torch.mm(a, b), iters)
                report(name, 2 * n**3 / s / 1e12, "TFLOP/s")
            except Exception:  # noqa: BLE001
                traceback.print_exc()
                report(name, float("nan"), "TFLOP/s")


def train_small(torch):
    # The model of tests/torch/torch_steps.py's training step, at a realistic batch.
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    x = torch.randn(256, 64, device="cuda")
    t = torch.randint(0, 10, (256,), device="cuda")

    def one():
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), t).backward()
        opt.step()
    report("train_small_mlp", 1 / timed_cuda(torch, one, 500), "steps/s")


def gpt2_small(torch):
    # GPT-2-small-sized: 12 layers, d_model 768, 12 heads, 1024-token context, vocabulary 50257;
    # batch 4 of 512 tokens, fp32 (TF32 off), forward and backward plus an AdamW step.
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    d, layers, heads, vocab, seq, batch = 768, 12, 12, 50257, 512, 4

    class GPT(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = torch.nn.Embedding(vocab, d)
            self.pos = torch.nn.Embedding(1024, d)
            layer = torch.nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, activation="gelu",
                                                     batch_first=True, norm_first=True)
            self.blocks = torch.nn.TransformerEncoder(layer, layers)
            self.norm = torch.nn.LayerNorm(d)
            self.head = torch.nn.Linear(d, vocab, bias=False)

        def forward(self, idx):
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            mask = torch.nn.Transformer.generate_square_subsequent_mask(idx.shape[1], device=idx.device)
            return self.head(self.norm(self.blocks(x, mask=mask, is_causal=True)))

    model = GPT().cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    idx = torch.randint(0, vocab, (batch, seq), device="cuda")

    def one():
        opt.zero_grad(set_to_none=True)
        logits = model(idx)
        torch.nn.functional.cross_entropy(logits.view(-1, vocab), idx.view(-1)).backward()
        opt.step()
    report("gpt2_small_train", 1 / timed_cuda(torch, one, 30), "steps/s")


def main():
    only = sys.argv[sys.argv.index("--figure") + 1] if "--figure" in sys.argv else None
    import torch
    for name in FIGURES:
        if only not in (None, name):
            continue
        try:
            globals()[name](torch)
        except Exception:  # noqa: BLE001
            traceback.print_exc()
            print(f"{name} nan failed", flush=True)


if __name__ == "__main__":
    main()
