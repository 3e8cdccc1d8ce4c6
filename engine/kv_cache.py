"""The paged KV cache: one K and one V pool tensor per layer, [num_blocks, block_size, kv_heads,
head_dim], addressed by the block ids the scheduler's BlockPool hands out (sim/kvpool.py).

Block 0 is the pool's null block: the scheduler never gives it to a request, so it is where
padding points (block tables are padded with 0; nothing is stored there by a forward pass).
New K/V rows are stored through a slot mapping (slot = block * block_size + offset).
Swap preemption copies a request's blocks, all layers at once, to a host tensor and back.
"""
from __future__ import annotations

import torch

NULL_BLOCK = 0


class PagedKVCache:
    def __init__(self, num_layers: int, num_blocks: int, block_size: int, num_kv_heads: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device):
        self.num_layers, self.num_blocks, self.block_size = num_layers, num_blocks, block_size
        self.num_kv_heads, self.head_dim = num_kv_heads, head_dim
        self.dtype, self.device = dtype, torch.device(device)
        # one tensor for all layers so a swap moves every layer in one copy: [L, 2, N, bs, Hkv, D]
        self.data = torch.zeros(num_layers, 2, num_blocks, block_size, num_kv_heads, head_dim,
                                dtype=dtype, device=self.device)
        # the device the pool landed on ("cuda" -> "cuda:0"): buffers compared against it (the
        # attention workspace) would otherwise never match and be reallocated every layer
        self.device = self.data.device
        self.k = [self.data[i, 0] for i in range(num_layers)]
        self.v = [self.data[i, 1] for i in range(num_layers)]
        self._k_rows = [t.view(-1, num_kv_heads, head_dim) for t in self.k]
        self._v_rows = [t.view(-1, num_kv_heads, head_dim) for t in self.v]
        self.host: dict[str, torch.Tensor] = {}  # request id -> swapped-out blocks [L, 2, n, ...]

    @property
    def block_bytes(self) -> int:
        return self.data[:, :, 0].numel() * self.data.element_size()

    @property
    def nbytes(self) -> int:
        return self.data.numel() * self.data.element_size()

    def store(self, layer: int, k: torch.Tensor, v: torch.Tensor, slots: torch.Tensor) -> None:
        """Write K/V rows [T, Hkv, D] of one layer at their slots [T]."""
        self._k_rows[layer].index_copy_(0, slots, k)
        self._v_rows[layer].index_copy_(0, slots, v)

    # -- swap to host memory --------------------------------------------------------------
    def swap_out(self, rid: str, blocks: list[int]) -> int:
        """Copy a preempted request's blocks to host memory (before the step's forward pass can
        overwrite them). Returns the bytes moved."""
        idx = torch.tensor(blocks, dtype=torch.long, device=self.device)
        saved = self.data.index_select(2, idx)
        if self.device.type == "cuda":
            host = torch.empty(saved.shape, dtype=saved.dtype, pin_memory=True)
            host.copy_(saved, non_blocking=True)
        else:
            host = saved
        self.host[rid] = host
        return host.numel() * host.element_size()

    def swap_in(self, rid: str, blocks: list[int]) -> int:
        """Restore a request's swapped blocks into (new) blocks, in order."""
        host = self.host.pop(rid)
        if host.shape[2] != len(blocks):
            raise RuntimeError(f"{rid}: {host.shape[2]} blocks swapped out, {len(blocks)} to restore into")
        idx = torch.tensor(blocks, dtype=torch.long, device=self.device)
        self.data.index_copy_(2, idx, host.to(self.device, non_blocking=True))
        return host.numel() * host.element_size()

    def drop(self, rid: str) -> None:
        self.host.pop(rid, None)
