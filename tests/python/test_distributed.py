"""normkit modules under torch.distributed on CPU (gloo): a 2-process data-parallel
step gives the gradients of one process on the whole batch."""

from __future__ import annotations

import gc

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

import normkit.torch as nkt

D, BATCH, WORLD = 24, 8, 2


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp = torch.nn.Linear(D, D)
        self.norm1 = nkt.FusedAddRMSNorm(D, eps=1e-6)
        self.mid = torch.nn.Linear(D, D)
        self.norm2 = nkt.FusedAddLayerNorm(D)
        self.norm3 = nkt.LayerNorm(D)
        self.out = torch.nn.Linear(D, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.inp(x)
        y, h = self.norm1(h)
        y, h = self.norm2(self.mid(y), h)
        return self.out(self.norm3(y + h)).squeeze(-1)


def make_net() -> Net:
    torch.manual_seed(0)
    net = Net()
    with torch.no_grad():
        for p in net.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return net


def data():
    g = torch.Generator().manual_seed(1)
    return torch.randn(BATCH, 3, D, generator=g), torch.randn(BATCH, 3, generator=g)


def loss_of(net, x, t):
    return torch.nn.functional.mse_loss(net(x), t)


def _data_parallel_grads(rank: int) -> dict:
    """This rank's gradients after one step of DDP, then of FSDP2, as plain
    tensors (the wrapped modules stay in this function)."""
    x, t = data()
    shard = slice(rank * BATCH // WORLD, (rank + 1) * BATCH // WORLD)

    net = make_net()
    model = torch.nn.parallel.DistributedDataParallel(net)
    loss_of(model, x[shard], t[shard]).backward()
    ddp = {k: p.grad.detach().clone() for k, p in net.named_parameters()}

    # FSDP2: parameters sharded as DTensors, gathered for forward/backward.
    from torch.distributed.fsdp import fully_shard

    net = make_net()
    for m in (net.norm1, net.norm2, net.norm3):
        fully_shard(m)
    fully_shard(net)
    loss_of(net, x[shard], t[shard]).backward()
    fsdp2 = {k: p.grad.full_tensor() for k, p in net.named_parameters()}
    return {"ddp": ddp, "fsdp2": fsdp2}


def _worker(rank: int, init_file: str, out_dir: str) -> None:
    """Both data-parallel modes in one pair of processes (spawning costs more
    than the steps): DDP, then FSDP2. Rank 0 saves the gradients of each."""
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=WORLD)
    try:
        grads = _data_parallel_grads(rank)
        # Tear down in a safe order: the wrapped modules (which hold the group)
        # freed, and both ranks past every collective, before the group goes.
        # Without it rank 1 sometimes aborted in gloo at exit (SIGABRT,
        # "terminate called without an active exception").
        gc.collect()
        dist.barrier()
        if rank == 0:
            torch.save(grads, f"{out_dir}/grads.pt")
    finally:
        dist.destroy_process_group()


def _reference_grads():
    net = make_net()
    x, t = data()
    loss_of(net, x, t).backward()
    return {k: p.grad for k, p in net.named_parameters()}


@pytest.fixture(scope="module")
def two_process_grads(tmp_path_factory):
    if not dist.is_available():
        pytest.skip("torch.distributed is not available")
    d = tmp_path_factory.mktemp("dist")
    mp.start_processes(_worker, args=(str(d / "init"), str(d)), nprocs=WORLD, start_method="spawn")
    return torch.load(d / "grads.pt")


@pytest.mark.parametrize("mode", ["ddp", "fsdp2"])
def test_two_process_gradients_equal_one_process(two_process_grads, mode) -> None:
    got = two_process_grads[mode]
    want = _reference_grads()
    assert set(got) == set(want)
    for k in want:
        # Each process averages its half of the batch, then the all-reduce
        # (DDP) or reduce-scatter (FSDP2) averages the two: the same sum as
        # one process, in another order.
        torch.testing.assert_close(got[k], want[k], rtol=1e-5, atol=1e-6, msg=k)
