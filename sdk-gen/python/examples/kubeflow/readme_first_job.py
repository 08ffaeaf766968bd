# From the Kubeflow SDK's README.md, "Run your first PyTorch distributed job" (kubeflow/sdk).
# The import changed: upstream has `from kubeflow.trainer import TrainerClient, CustomTrainer`.
# Each node prints its rank in a world of 3, on CPU with gloo; upstream's 2 CPUs per node are
# a quarter of one here, so that the three nodes fit one small machine.
from kiln import TrainerClient, CustomTrainer

def get_torch_dist():
    import os
    import torch
    import torch.distributed as dist

    dist.init_process_group(backend="gloo")
    print("PyTorch Distributed Environment")
    print(f"WORLD_SIZE: {dist.get_world_size()}")
    print(f"RANK: {dist.get_rank()}")
    print(f"LOCAL_RANK: {os.environ['LOCAL_RANK']}")

# Create the TrainJob
job_id = TrainerClient().train(
    runtime=TrainerClient().get_runtime("torch-distributed"),
    trainer=CustomTrainer(
        func=get_torch_dist,
        num_nodes=3,
        resources_per_node={
            "cpu": "250m",
        },
    ),
)

# Wait for TrainJob to complete
TrainerClient().wait_for_job_status(job_id)

# Print TrainJob logs
print("\n".join(TrainerClient().get_job_logs(name=job_id)))
