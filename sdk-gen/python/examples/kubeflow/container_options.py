# From the Kubeflow SDK's options reference (kubeflow/sdk docs/source/train: "TrainerCommand" and
# "Combining Multiple Options"). The imports changed: upstream has `from kubeflow.trainer import
# TrainerClient, CustomTrainerContainer` and `from kubeflow.trainer.options import ...`. Trimmed
# to something that runs anywhere: a small public Python image and a command that prints each
# node's torchrun rank, instead of upstream's "my-image:latest" and "python train.py --epochs 10".
from kiln import CustomTrainerContainer, TrainerClient
from kiln.options import Annotations, Labels, Name, TrainerCommand

trainer_client = TrainerClient()

job_id = trainer_client.train(
    trainer=CustomTrainerContainer(
        image="python:3.12-slim",
        num_nodes=2,
        resources_per_node={"cpu": 1, "memory": "256Mi"},
        env={"GREETING": "hello"},
    ),
    options=[
        Name("experiment-001"),
        Labels({"project": "llm-finetune"}),
        Annotations({"author": "alice"}),
        TrainerCommand(
            ["python", "-c", "import os; print(os.environ['GREETING'], 'from node', os.environ['PET_NODE_RANK'], 'of', os.environ['PET_NNODES'])"]
        ),
    ],
)

trainer_client.wait_for_job_status(job_id)
for line in trainer_client.get_job_logs(job_id):
    print(line)
