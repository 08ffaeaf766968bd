# A script written for the Kubeflow SDK (kubeflow-trainer 0.5, TrainerClient) as its users
# write them. test_live runs it against Kiln with only the import line changed: the
# "Coming from Kubeflow" promise of docs/sdk.md. Nothing below the import is Kiln's.
from kubeflow.trainer import CustomTrainerContainer, TrainerClient

client = TrainerClient()

runtime = client.get_runtime("torch-distributed")
assert runtime.name == "torch-distributed"
assert runtime.trainer.framework == "torch", runtime.trainer
assert runtime.trainer.num_nodes >= 1

# Kubeflow's argument order: runtime, initializer, trainer.
name = client.train(runtime, None, CustomTrainerContainer(image=runtime.trainer.image, num_nodes=2, env={"EPOCHS": "1"}))
assert [j for j in client.list_jobs(runtime=runtime) if j.name == name], "list_jobs(runtime=) lists it"

job = client.wait_for_job_status(name, status={"Complete"}, timeout=300, polling_interval=2)
assert job.status == "Complete", job.status
assert job.runtime.name == "torch-distributed"
assert job.num_nodes == 2
assert job.creation_timestamp is not None

job = client.get_job(name)
assert [s.name for s in job.steps] == ["node-0", "node-1"], job.steps
for step in job.steps:
    assert step.status == "Succeeded", step
    assert step.pod_name.startswith(name), step.pod_name
    assert step.device in ("cpu", "gpu"), step.device
    assert isinstance(step.device_count, str)

for line in client.get_job_logs(name, follow=False):
    assert isinstance(line, str)

try:
    client.get_job(name + "-missing")
    raise AssertionError("a missing job was found")
except RuntimeError as e:  # Kubeflow's SDK raises RuntimeError for a failed call
    assert "not found" in str(e), e

client.delete_job(name)
print("kubeflow script: ok", name)
