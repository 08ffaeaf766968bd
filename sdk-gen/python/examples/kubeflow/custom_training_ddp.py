# From the Kubeflow SDK's docs/source/train/custom-training.rst, "Basic Example" and "Passing
# Parameters" (kubeflow/sdk). The import changed: upstream has `from kubeflow.trainer import
# TrainerClient` and `from kubeflow.trainer.types import CustomTrainer`. Trimmed to CPU: the
# training loop is upstream's (a torch.nn.Linear(10, 1), SGD, a "Step N, Loss: X" line), made
# distributed as the Kubeflow guides do (DistributedDataParallel on gloo, 2 nodes), with a
# target to learn and 20 steps instead of 1000, and func_args for the learning rate and steps.
from kiln import CustomTrainer, TrainerClient


def my_training_function(learning_rate, steps):
    """Your training code runs inside this function."""
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group(backend="gloo")
    rank, world_size = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank} of {world_size}")

    # Create model: DDP starts every rank from rank 0's weights and averages the gradients.
    torch.manual_seed(0)
    model = DistributedDataParallel(torch.nn.Linear(10, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)

    # Training loop: each rank its own batch of the same task (y = x1 + ... + x10).
    data = torch.Generator().manual_seed(1 + rank)
    for step in range(steps):
        x = torch.randn(32, 10, generator=data)
        loss = torch.nn.functional.mse_loss(model(x), x.sum(dim=1, keepdim=True))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()

        if rank == 0:
            print(f"Step {step}, Loss: {loss.item():.4f}")

    dist.destroy_process_group()


# Submit to Kubernetes
client = TrainerClient()
job_name = client.train(
    trainer=CustomTrainer(
        func=my_training_function,
        func_args={"learning_rate": 0.05, "steps": 20},
        num_nodes=2,
    )
)
client.wait_for_job_status(job_name)
for line in client.get_job_logs(job_name):
    print(line)
