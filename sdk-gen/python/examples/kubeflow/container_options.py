# From the Kubeflow SDK's options reference (kubeflow/sdk docs/source/train: "TrainerCommand" and
# "Combining Multiple Options"). The imports changed: upstream has `from kubeflow.trainer import
# TrainerClient, CustomTrainerContainer` and `from kubeflow.trainer.options import ...`. Trimmed
# to something that runs anywhere: the runtime's own image (as get_runtime describes it) and a
# command that prints each node's torchrun rank, instead of upstream's "my-image:latest" and
# "python train.py --epochs 10".
from kiln import CustomTrainerContainer, TrainerClient
from kiln.options import Annotations, Labels, Name, TrainerCommand

trainer_client = TrainerClient()
runtime = trainer_client.get_runtime("torch-distributed")

job_id = trainer_client.train(
    runtime=runtime,
    trainer=CustomTrainerContainer(
        image=runtime.trainer.image,
        num_nodes=2,
        resources_per_node={"cpu": "250m", "memory": "256Mi"},
        env={"GREETING": "hello"},
    ),
    options=[
        Name("experiment-001"),
        Labels({"project": "llm-finetune"}),
        Annotations({"author": "alice"}),
        TrainerCommand(
            ["python3", "-c", "import os; print(os.environ['GREETING'], 'from node', os.environ['PET_NODE_RANK'], 'of', os.environ['PET_NNODES'])"]
        ),
    ],
)

trainer_client.wait_for_job_status(job_id)
for line in trainer_client.get_job_logs(job_id):
    print(line)
