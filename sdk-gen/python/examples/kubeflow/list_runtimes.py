# From the Kubeflow SDK's docs/source/train/custom-training.rst, "Choosing a Runtime"
# (kubeflow/sdk), with the runtime's trainer as Kubeflow's Runtime describes it. The import
# changed: upstream has `from kubeflow.trainer import TrainerClient`.
from kiln import TrainerClient

client = TrainerClient()

# List available runtimes
runtimes = client.list_runtimes()
for rt in runtimes:
    print(f"{rt.name}")
    print(f"  framework: {rt.trainer.framework}, nodes: {rt.trainer.num_nodes}, device: {rt.trainer.device} x {rt.trainer.device_count}")
