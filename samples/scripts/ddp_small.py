"""DDP over a small compiled model on the CPU (gloo): every rank compiles the same graphs.

Run under a launcher: ``irscope inspect --nproc 2 samples/scripts/ddp_small.py`` or
``irscope inspect -- torchrun --nproc-per-node 2 samples/scripts/ddp_small.py``.
``--branch`` makes the last rank take another branch in forward, so its graph differs;
``--cuda`` runs each rank on its own GPU with NCCL instead; ``--buckets`` adds a wide middle
layer (1.6 MB of weights) and 1 MB DDP buckets, so that Dynamo's DDP optimizer splits the graph
at each bucket: several output codes per role in one graph.
"""

import os
import sys

import torch
import torch.distributed as dist
from torch import nn


class Small(nn.Module):
    def __init__(self, other_branch: bool, width: int = 16, middle: bool = False):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(8, width), nn.Linear(width, 4)
        self.mid = nn.Linear(width, width) if middle else None
        self.other_branch = other_branch

    def forward(self, x):
        h = self.fc1(x)
        h = torch.tanh(h) if self.other_branch else torch.relu(h)
        if self.mid is not None:
            h = torch.relu(self.mid(h))
        return self.fc2(h)


def main() -> None:
    cuda = "--cuda" in sys.argv
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', rank))}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
    torch.manual_seed(0)
    other = "--branch" in sys.argv and rank == world - 1
    buckets = "--buckets" in sys.argv
    small = Small(other, width=640, middle=True) if buckets else Small(other)
    model = nn.parallel.DistributedDataParallel(small.to(device),
                                                **({"bucket_cap_mb": 1} if buckets else {}))
    step = torch.compile(model, backend=os.environ.get("DDP_BACKEND", "inductor"))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        loss = step(torch.randn(4, 8, device=device)).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
    dist.destroy_process_group()
    print(f"rank {rank}/{world}: done")


if __name__ == "__main__":
    main()
