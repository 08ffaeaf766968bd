# From the Kubeflow SDK's docs/source/train/initializers.rst, "Using Both Together" (kubeflow/sdk).
# The import changed: upstream has `from kubeflow.trainer import (Initializer,
# HuggingFaceDatasetInitializer, HuggingFaceModelInitializer)` (and TrainerClient, CustomTrainer).
# Trimmed to small public repositories needing no access token, and a fine_tune function
# (upstream leaves it to you) that shows what the initializers put in /workspace.
from kiln import (
    CustomTrainer,
    HuggingFaceDatasetInitializer,
    HuggingFaceModelInitializer,
    Initializer,
    TrainerClient,
)


def fine_tune():
    import os

    for what in ("dataset", "model"):
        path = os.path.join("/workspace", what)
        print(what, sorted(os.listdir(path)) if os.path.isdir(path) else "missing")


client = TrainerClient()
job_id = client.train(
    initializer=Initializer(
        dataset=HuggingFaceDatasetInitializer(storage_uri="hf://tatsu-lab/alpaca"),
        model=HuggingFaceModelInitializer(storage_uri="hf://openai-community/gpt2"),
    ),
    trainer=CustomTrainer(func=fine_tune),
)

client.wait_for_job_status(job_id)
for line in client.get_job_logs(job_id):
    print(line)
