"""Kiln's Python SDK: submit, follow and control training jobs on a Kiln cluster.

    from kiln import TrainerClient, CustomTrainerContainer

    client = TrainerClient()  # the Kiln configuration, as the kiln CLI reads it
    name = client.train(
        runtime="torch-distributed",
        trainer=CustomTrainerContainer(command=["torchrun", "train.py"], num_nodes=2),
        active_deadline_seconds=28800,
        ttl_seconds_after_finished=86400,
    )
    client.wait_for_job_status(name, status={"Complete"})

    # and every Sunday at 02:00 in Berlin, one run at a time
    client.create_schedule("weekly", "0 2 * * 0", "torch-distributed", time_zone="Europe/Berlin", concurrency_policy="Forbid")

Every public name of the Kubeflow SDK's ``kubeflow.trainer`` (0.5) is here with its signature and
meaning, so a Kubeflow script runs with its imports changed to ``from kiln import ...`` and
``from kiln.options import ...`` (docs/sdk-kubeflow-parity.md lists them).

Standard library only (Python 3.9 or newer). The typed messages and service clients of the
API are in :mod:`kiln.v1`; every error is a :class:`kiln.KilnError`.
"""

from kiln.client import (
    DEFAULT_RUNTIME,
    STATUSES,
    Checkpoint,
    MetricPoint,
    Progress,
    Queue,
    RuntimeRef,
    Schedule,
    Step,
    TrainerClient,
    TrainJob,
)
from kiln.config import ConfigError
from kiln.errors import *  # noqa: F401,F403 - one exception per Connect code
from kiln.errors import __all__ as _errors
from kiln.types import (
    DATASET_PATH,
    MODEL_PATH,
    TRAINJOB_COMPLETE,
    TRAINJOB_CREATED,
    TRAINJOB_FAILED,
    TRAINJOB_QUEUED,
    TRAINJOB_RUNNING,
    TRAINJOB_SUSPENDED,
    BuiltinTrainer,
    ContainerBackendConfig,
    CustomTrainer,
    CustomTrainerContainer,
    DataCacheInitializer,
    DataFormat,
    DataType,
    Event,
    HuggingFaceDatasetInitializer,
    HuggingFaceModelInitializer,
    Initializer,
    KubernetesBackendConfig,
    LocalProcessBackendConfig,
    LoraConfig,
    Loss,
    Runtime,
    RuntimeKind,
    RuntimeTrainer,
    S3DatasetInitializer,
    S3ModelInitializer,
    TorchTuneConfig,
    TorchTuneInstructDataset,
    TrainerType,
    TrainingRuntimeSource,
    TrainJobTemplate,
    update_trainjob_status,
)

__version__ = "0.1.0"

__all__ = [
    # The Kubeflow SDK's (kubeflow.trainer.__all__, 0.5).
    "BuiltinTrainer",
    "CustomTrainer",
    "CustomTrainerContainer",
    "DataCacheInitializer",
    "DataFormat",
    "DATASET_PATH",
    "DataType",
    "Event",
    "HuggingFaceDatasetInitializer",
    "HuggingFaceModelInitializer",
    "Initializer",
    "LoraConfig",
    "Loss",
    "MODEL_PATH",
    "Runtime",
    "RuntimeKind",
    "TorchTuneConfig",
    "TorchTuneInstructDataset",
    "RuntimeTrainer",
    "S3DatasetInitializer",
    "S3ModelInitializer",
    "TrainJobTemplate",
    "TrainerClient",
    "TrainerType",
    "LocalProcessBackendConfig",
    "ContainerBackendConfig",
    "KubernetesBackendConfig",
    "TrainingRuntimeSource",
    "update_trainjob_status",
    # Kiln's.
    "DEFAULT_RUNTIME",
    "STATUSES",
    "TRAINJOB_COMPLETE",
    "TRAINJOB_CREATED",
    "TRAINJOB_FAILED",
    "TRAINJOB_QUEUED",
    "TRAINJOB_RUNNING",
    "TRAINJOB_SUSPENDED",
    "Checkpoint",
    "ConfigError",
    "MetricPoint",
    "Progress",
    "Queue",
    "RuntimeRef",
    "Schedule",
    "Step",
    "TrainJob",
    *_errors,
]

# kiln.options is there after `import kiln`, as kubeflow.trainer.options is reached.
from kiln import options  # noqa: E402,F401
