# dcp_many_chunks.py - writes a torch.distributed.checkpoint directory (SAFETENSORS layout, 2 gloo
# processes) of N tensors each sharded in two: the input that made DCP assembly quadratic.
# Usage: .venv/bin/python bench/dcp_many_chunks.py N OUT_DIR
import os, sys, socket, torch, torch.distributed as dist, torch.multiprocessing as mp
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint import FileSystemWriter
from torch.distributed.checkpoint.filesystem import SerializationFormat
def worker(rank, world, out, port, n):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard, distribute_tensor
    mesh = init_device_mesh("cpu", (world,))
    sd = {f"l{i}.w": distribute_tensor(torch.full((4, 2), float(i)), mesh, [Shard(0)]) for i in range(n)}
    dcp.save(sd, storage_writer=FileSystemWriter(out, serialization_format=SerializationFormat.SAFETENSORS))
    dist.destroy_process_group()
if __name__ == "__main__":
    n = int(sys.argv[1]); s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
    mp.spawn(worker, args=(2, sys.argv[2], port, n), nprocs=2)
