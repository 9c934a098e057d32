"""The output cache: large outputs the caller did not pass come from kept
blocks, are correct, are freed back from any thread, and obey the limit."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import ml_dtypes
import numpy as np
import pytest
import torch

import normkit
import reference as ref

MIB = 1 << 20
ROWS, D = 256, 2048  # 2 MiB of float32: served by the cache; 1 MiB of 16-bit


@pytest.fixture(autouse=True)
def fresh_cache():
    limit = normkit.output_cache_info()["limit_bytes"]
    normkit.empty_output_cache()
    yield
    normkit.set_output_cache_limit(limit)


def _data_ptr(a) -> int:
    return a.data_ptr() if isinstance(a, torch.Tensor) else a.__array_interface__["data"][0]


@pytest.mark.parametrize("framework", ["numpy", "torch"])
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64"])
def test_a_freed_output_is_reused_and_results_are_right(framework: str, dtype: str) -> None:
    rng = np.random.default_rng(7)
    x64 = rng.standard_normal((ROWS, D)) * 3 + 1
    w64 = rng.standard_normal(D)
    np_dtype = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    xn, wn = x64.astype(np_dtype), w64.astype(np_dtype)
    if framework == "torch":
        tdt = getattr(torch, dtype)
        x, w = torch.from_numpy(xn.astype(np.float64)).to(tdt), torch.from_numpy(wn.astype(np.float64)).to(tdt)
    else:
        x, w = xn, wn
    before = normkit.output_cache_info()

    y = normkit.layer_norm(x, D, w, None)
    info = normkit.output_cache_info()
    assert info["live_blocks"] == before["live_blocks"] + 1
    assert info["live_bytes"] >= ROWS * D * np_dtype.itemsize
    assert type(y) is type(x) and tuple(y.shape) == (ROWS, D)
    if framework == "numpy":
        assert y.dtype == np_dtype and y.flags["C_CONTIGUOUS"] and y.flags["WRITEABLE"]
    else:
        assert y.dtype == x.dtype and y.is_contiguous()
    want = ref.forward(ref.f64(xn), wn, None, 1e-5, rms=False)
    ref.assert_within("y", ref.f64(y), want.y, ref.forward_tolerance(want, np_dtype, np_dtype))

    ptr = _data_ptr(y)
    del y
    assert normkit.output_cache_info()["cached_blocks"] == info["cached_blocks"] + 1
    y2 = normkit.layer_norm(x, D, w, None)
    after = normkit.output_cache_info()
    assert _data_ptr(y2) == ptr, "the freed block is handed out again"
    assert after["hits"] == info["hits"] + 1 and after["misses"] == info["misses"]


def test_small_outputs_and_a_zero_limit_use_the_framework() -> None:
    x = torch.randn(4, D)
    before = normkit.output_cache_info()
    y = normkit.rms_norm(x, D)  # 32 KiB
    assert normkit.output_cache_info()["live_blocks"] == before["live_blocks"]
    normkit.set_output_cache_limit(0)
    big = torch.randn(ROWS, D)
    y = normkit.rms_norm(big, D)
    info = normkit.output_cache_info()
    assert info["live_blocks"] == before["live_blocks"] and info["limit_bytes"] == 0
    torch.testing.assert_close(y, torch.nn.functional.rms_norm(big, (D,), eps=torch.finfo(torch.float32).eps))


def test_the_limit_bounds_what_is_kept() -> None:
    x = torch.randn(ROWS, D)  # outputs of one 2 MiB block
    ys = [normkit.rms_norm(x, D) for _ in range(4)]
    assert normkit.output_cache_info()["live_blocks"] >= 4
    normkit.set_output_cache_limit(5 * MIB)
    del ys
    info = normkit.output_cache_info()
    assert info["cached_blocks"] == 2 and info["cached_bytes"] == 4 * MIB
    normkit.set_output_cache_limit(2 * MIB)
    assert normkit.output_cache_info()["cached_bytes"] == 2 * MIB
    normkit.empty_output_cache()
    assert normkit.output_cache_info()["cached_bytes"] == 0
    with pytest.raises(ValueError, match="nbytes must be >= 0"):
        normkit.set_output_cache_limit(-1)


def test_a_kept_block_serves_up_to_twice_its_need_only() -> None:
    big = normkit.rms_norm(torch.randn(4 * ROWS, D), D)  # 8 MiB
    ptr = big.data_ptr()
    del big
    small = normkit.rms_norm(torch.randn(ROWS, D), D)  # 2 MiB: 8 MiB would waste more than it uses
    assert small.data_ptr() != ptr
    half = normkit.rms_norm(torch.randn(2 * ROWS, D), D)  # 4 MiB: takes the 8 MiB block
    assert half.data_ptr() == ptr


def test_outputs_freed_on_other_threads_and_under_autograd() -> None:
    x = torch.randn(ROWS, D, requires_grad=True)
    w = torch.randn(D, requires_grad=True)
    y = normkit.layer_norm(x, (D,), w, None)
    gy = torch.randn_like(y)
    (dx,) = torch.autograd.grad(y, x, gy)
    want = torch.nn.functional.layer_norm(x, (D,), w, None)
    (dx_want,) = torch.autograd.grad(want, x, gy)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(dx, dx_want, rtol=1e-4, atol=1e-4)
    del y, want, dx, dx_want

    outs = [normkit.rms_norm(torch.randn(ROWS, D), D) for _ in range(16)]
    live = normkit.output_cache_info()["live_blocks"]

    def drop(i: int) -> None:
        outs[i] = None

    threads = [threading.Thread(target=drop, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert normkit.output_cache_info()["live_blocks"] == live - 16


@pytest.mark.parametrize("value,expected", [("0", 0), (str(64 * MIB), 64 * MIB), ("lots", 1 << 30), ("-5", 1 << 30)])
def test_the_initial_limit_comes_from_the_environment(value: str, expected: int) -> None:
    code = "import normkit; print(normkit.output_cache_info()['limit_bytes'])"
    env = dict(os.environ, NORMKIT_OUTPUT_CACHE_BYTES=value)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == expected


def test_a_forked_child_can_use_the_cache() -> None:
    kept = normkit.rms_norm(torch.randn(ROWS, D), D)  # a live block, inherited by the child
    del kept  # and a kept one
    pid = os.fork()
    if pid == 0:  # the child: allocate, free, reuse; report through the exit status
        try:
            y = normkit.rms_norm(torch.randn(ROWS, D), D)
            ptr = y.data_ptr()
            del y
            ok = normkit.rms_norm(torch.randn(ROWS, D), D).data_ptr() == ptr
        except BaseException:
            ok = False
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
