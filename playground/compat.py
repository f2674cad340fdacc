"""Workarounds for known bugs of the torch versions we run on, each named with its issue and the fix's version."""

from __future__ import annotations

import threading
from collections import defaultdict

import torch


def cudagraph_trees_in_this_thread() -> None:
    """Give the calling thread torch's CUDA-graph-tree state if it has none (pytorch#123177, fixed in torch 2.13).

    Before the fix that state lived only in the thread that first imported inductor's
    cudagraph_trees, and a reduce-overhead call from any other thread failed an assert. The
    engine compiles on its device thread, but a process that compiled on another thread first
    (seen on the H200: fast-backend tests on pytest's thread, then an engine run) could not.
    Newer torch creates the state lazily itself; then this does nothing.
    """
    from torch._inductor import cudagraph_trees as trees

    if (hasattr(trees, "_initialize_tls") or hasattr(trees.local, "tree_manager_containers")
            or torch._C._is_key_in_tls("tree_manager_containers")):
        return
    trees.local.tree_manager_containers = {}
    trees.local.tree_manager_locks = defaultdict(threading.Lock)
    torch._C._stash_obj_in_tls("tree_manager_containers", trees.local.tree_manager_containers)
    torch._C._stash_obj_in_tls("tree_manager_locks", trees.local.tree_manager_locks)
