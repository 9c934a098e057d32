"""CUDA tensors through normkit's functions and modules, against the same
call on the CPU (itself checked against the fp64 oracle elsewhere). Skipped,
saying so, where PyTorch or normkit has no GPU."""

import pytest

torch = pytest.importorskip("torch")
import normkit  # noqa: E402
import normkit.torch as nkt  # noqa: E402

pytestmark = pytest.mark.skipif(
    not torch.cuda.is_available() or normkit.cuda_device_count() == 0,
    reason="no CUDA device for PyTorch and normkit here: the GPU tests did not run",
)


def unit_roundoff(dtype):
    return {torch.float32: 2.0**-24, torch.bfloat16: 2.0**-8, torch.float16: 2.0**-11}[dtype]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("module", ["layer", "rms"])
def test_module_forward_and_backward_match_the_cpu(dtype, module):
    D = 1000
    def make(device):
        if module == "layer":
            return nkt.LayerNorm(D, dtype=dtype, device=device)
        return nkt.RMSNorm(D, eps=1e-6, dtype=dtype, device=device)

    cpu, gpu = make("cpu"), make("cuda")
    with torch.no_grad():
        cpu.weight.uniform_(0.5, 1.5)
    gpu.load_state_dict(cpu.state_dict())
    x = torch.randn(7, 33, D, dtype=dtype)
    dy = torch.randn_like(x)
    xc, xg = x.clone().requires_grad_(), x.cuda().requires_grad_()
    yc, yg = cpu(xc), gpu(xg)
    yc.backward(dy)
    yg.backward(dy.cuda())
    assert yg.device.type == "cuda" and yg.dtype == dtype
    # Each device is within the oracle's budget, about 4 units of the output's
    # rounding for y at this D (docs/numerics.md), so the two differ by at
    # most twice that; dx carries a row sum's growth as well, 4x more.
    u = unit_roundoff(dtype)
    torch.testing.assert_close(yg.cpu().float(), yc.float(), rtol=8 * u, atol=8 * u)
    torch.testing.assert_close(xg.grad.cpu().float(), xc.grad.float(), rtol=32 * u, atol=32 * u)


def test_runs_on_the_current_stream():
    x = torch.randn(256, 4096, device="cuda")
    w = torch.rand(4096, device="cuda")
    want = normkit.rms_norm(x, (4096,), w, 1e-6)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        got = normkit.rms_norm(x, (4096,), w, 1e-6)
    s.synchronize()
    assert torch.equal(got, want)


def test_arguments_on_different_devices_are_an_error():
    x = torch.randn(4, 8, device="cuda")
    with pytest.raises(ValueError, match="weight"):
        normkit.rms_norm(x, (8,), torch.ones(8), 1e-6)


def test_replace_norms_swaps_a_module_on_the_gpu_checked_there():
    class LlamaStyleRMSNorm(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.weight = torch.nn.Parameter(1 + 0.1 * torch.randn(d))
            self.variance_epsilon = 1e-6

        def forward(self, x):
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
            return self.weight * h.to(x.dtype)

    model = torch.nn.Sequential(LlamaStyleRMSNorm(512)).cuda()
    x = torch.randn(4, 9, 512, device="cuda")
    want = model(x)
    weight = model[0].weight
    report = nkt.replace_norms(model)
    assert report[0].swapped, report[0].reason
    assert model[0].weight is weight  # the same Parameter, still on the GPU
    got = model(x)
    assert got.device == x.device
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
