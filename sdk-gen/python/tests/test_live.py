"""The SDK against a real Kiln API server: the local platform (make up), or any server the
Kiln configuration names. Skipped unless KILN_SDK_LIVE=1 (make test sets it, with
KILN_CONFIG pointing at the local platform's configuration)."""

import os
import re
import time
import unittest
import uuid
from typing import List, Optional, Tuple
from zoneinfo import ZoneInfo

import kiln
from kiln import v1

LIVE = os.environ.get("KILN_SDK_LIVE") == "1"
QUEUE = os.environ.get("KILN_SDK_QUEUE", "default")


def manifest() -> str:
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "testdata", "slow-trainjob.yaml"), encoding="utf-8") as f:
        return f.read()


def slow_job(name: str, seconds: int, deadline: Optional[int] = None) -> str:
    """A TrainJob whose simulated training pod runs for `seconds` on the local platform."""
    text = manifest()
    deadline_line = f"activeDeadlineSeconds: {deadline}" if deadline else ""
    return text.replace("NAME", name).replace("QUEUE", QUEUE).replace("DURATION", f"{seconds}s").replace("DEADLINE", deadline_line)


def manifest_run() -> Tuple[str, kiln.CustomTrainerContainer]:
    """The runtime and training container of the shared manifest (its image is the runtime's)."""
    text = manifest()
    runtime = re.search(r"runtimeRef: \{name: ([\w.-]+)\}", text)
    trainer = re.search(r"trainer: \{command: \[([^\]]*)\], numNodes: (\d+)\}", text)
    if not runtime or not trainer:
        raise AssertionError("slow-trainjob.yaml: no runtimeRef or trainer line in the form this test reads")
    command = [c.strip() for c in trainer.group(1).split(",")]
    return runtime.group(1), kiln.CustomTrainerContainer(command=command, num_nodes=int(trainer.group(2)))


@unittest.skipUnless(LIVE, "KILN_SDK_LIVE=1 runs these against the Kiln API server of the Kiln configuration")
class LiveTest(unittest.TestCase):
    def setUp(self) -> None:
        self.client = kiln.TrainerClient()
        self.names: List[str] = []

    def tearDown(self) -> None:
        for n in self.names:
            try:
                self.client.delete_job(n)
            except kiln.NotFoundError:
                pass

    def name(self, what: str) -> str:
        n = f"sdk-py-{what}-{uuid.uuid4().hex[:5]}"
        self.names.append(n)
        return n

    def eventually(self, cond, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while not cond():
            if time.monotonic() > end:
                self.fail(f"not true after {timeout}s")
            time.sleep(0.2)

    def create_slow(self, name: str, seconds: int, deadline: Optional[int] = None) -> None:
        self.client.jobs.create_train_job(v1.CreateTrainJobRequest(namespace=self.client.namespace, manifest=slow_job(name, seconds, deadline)))

    def test_submit_wait_logs_events(self) -> None:
        name = self.client.train(
            runtime="torch-distributed",
            trainer=kiln.CustomTrainerContainer(command=["torchrun", "train.py"], num_nodes=2, resources_per_node={"nvidia.com/gpu": 8}, env={"EPOCHS": "3"}),
            queue=QUEUE,
            active_deadline_seconds=28800,
            ttl_seconds_after_finished=86400,
            name=self.name("quick"),
            labels={"team": "sdk"},
        )
        seen: List[str] = []
        job = self.client.wait_for_job_status(name, {"Complete"}, timeout=120, callbacks=[lambda j: seen.append(j.status)])
        self.assertEqual((job.status, job.reason), ("Complete", "AllJobsCompleted"))
        self.assertEqual(seen[-1], "Complete")
        self.assertIn("Running", seen)
        job = self.client.get_job(name)
        self.assertEqual((job.num_nodes, len(job.steps), job.steps[0].devices), (2, 2, {"nvidia.com/gpu": 8}))
        self.assertEqual((job.active_deadline_seconds, job.ttl_seconds_after_finished, job.queue), (28800, 86400, QUEUE))
        self.assertEqual(job.labels["team"], "sdk")
        self.assertIn(name, [j.name for j in self.client.list_jobs(label_selector="team=sdk", status=["Complete"])])
        lines = list(self.client.get_job_logs(name, follow=True))
        self.assertEqual(lines[-1], "[kiln-sim] training complete")
        self.assertEqual(list(self.client.get_job_logs(name, step="node-1", tail=1)), ["[kiln-sim] training complete"])
        reasons = {(e.object.split("/")[0], e.reason) for e in self.client.get_job_events(name)}
        self.assertLessEqual({("TrainJob", "Created"), ("TrainJob", "Completed"), ("Workload", "Admitted")}, reasons)

    def test_a_kubeflow_script_runs_with_only_the_import_changed(self) -> None:
        # docs/sdk.md, "Coming from Kubeflow": kubeflow_script.py is written for the Kubeflow
        # SDK's TrainerClient; only its import line is changed here.
        path = os.path.join(os.path.dirname(__file__), "kubeflow_script.py")
        with open(path, encoding="utf-8") as f:
            source = f.read()
        kubeflow_import = "from kubeflow.trainer import CustomTrainerContainer, TrainerClient\n"
        self.assertIn(kubeflow_import, source)
        source = source.replace(kubeflow_import, "from kiln import CustomTrainerContainer, TrainerClient\n")
        exec(compile(source, path, "exec"), {"__name__": "kubeflow_script"})

    def test_logs_follow_waits_for_the_pods(self) -> None:
        name = self.name("follow")
        self.create_slow(name, 4)
        # Asked at once, before any pod runs: follow waits for node-0 and streams to its end.
        lines = list(self.client.get_job_logs(name, follow=True))
        self.assertEqual(lines[0], "[kiln-sim] starting training")
        self.assertEqual(lines[-1], "[kiln-sim] training complete")

    def test_deadline_fails_the_job(self) -> None:
        name = self.name("deadline")
        self.create_slow(name, 60, deadline=3)
        with self.assertRaises(kiln.JobFailedError) as cm:
            self.client.wait_for_job_status(name, "Complete", timeout=90)
        self.assertEqual((cm.exception.job.status, cm.exception.job.reason), ("Failed", "DeadlineExceeded"))
        job = self.client.wait_for_job_status(name, {"Failed"}, timeout=10)
        self.assertIsNotNone(job.completion_time)

    def test_ttl_deletes_the_finished_job(self) -> None:
        name = self.client.train(runtime="torch-distributed", trainer=kiln.CustomTrainerContainer(num_nodes=1), ttl_seconds_after_finished=2, name=self.name("ttl"))
        job = self.client.wait_for_job_status(name, "Complete", timeout=120)
        self.assertIsNotNone(job.ttl_delete_time)
        with self.assertRaisesRegex(kiln.NotFoundError, "was deleted while waiting"):
            self.client.wait_for_job_status(name, "Failed", timeout=60)
        with self.assertRaises(kiln.NotFoundError):
            self.client.get_job(name)

    def test_suspend_and_resume_under_a_queue(self) -> None:
        name = self.name("suspend")
        self.create_slow(name, 60)
        running = self.client.wait_for_job_status(name, "Running", timeout=60)
        self.assertEqual(running.queue, QUEUE)
        self.assertEqual(self.client.suspend_job(name).status, "Suspended")
        # Right away, not once Kueue has acted: a job being suspended reads Suspended.
        job = self.client.get_job(name)
        self.assertEqual((job.status, job.reason, job.deadline_time), ("Suspended", "Deactivated", None))
        self.assertEqual(self.client.list_jobs(status=["Suspended"])[0].status, "Suspended")
        # Once Kueue has stopped it (spec.suspend), the operator clears its start time (its
        # deadline clock). Resuming before that would find it never stopped, still Running.
        self.eventually(lambda: (lambda j: j.raw.spec.suspend and j.start_time is None)(self.client.get_job(name)))
        self.assertEqual(self.client.get_job(name).status, "Suspended")
        self.assertEqual(self.client.resume_job(name).status, "Queued")
        self.client.wait_for_job_status(name, "Running", timeout=60)
        self.eventually(lambda: self.client.get_job(name).start_time is not None)
        statuses = {j.name: j.status for j in self.client.list_jobs()}
        self.assertEqual(statuses[name], "Running")

    def test_permission_denied_in_another_namespace(self) -> None:
        with self.assertRaisesRegex(kiln.PermissionDeniedError, r"may not list trainjobs.* in namespace kube-system"):
            self.client.list_jobs(namespace="kube-system")
        with self.assertRaises(kiln.PermissionDeniedError):
            self.client.train(runtime="torch-distributed", namespace="kube-system")

    def test_validation_error_names_the_field(self) -> None:
        with self.assertRaises(kiln.InvalidArgumentError) as cm:
            self.client.train(runtime="torch-distributed", trainer=kiln.CustomTrainerContainer(resources_per_node={"nvidia.com/gpu": "eight"}))
        fields = [v.field for v in cm.exception.field_violations]
        self.assertIn("train_job.spec.resources_per_node.requests[nvidia.com/gpu]", fields)
        with self.assertRaises(kiln.NotFoundError):
            self.client.get_runtime("no-such-runtime")

    def test_retried_train_creates_one_job(self) -> None:
        # A retry after a lost answer carries the first attempt's request id (the transport
        # does this by itself: test_wire's lost-answer test); the server returns the job that
        # attempt created.
        label, rid = uuid.uuid4().hex[:8], uuid.uuid4().hex
        args = dict(runtime="torch-distributed", trainer=kiln.CustomTrainerContainer(num_nodes=1), generate_name="sdk-py-retry-", labels={"retry": label}, request_id=rid)
        first = self.client.train(**args)
        self.names.append(first)
        self.assertEqual(self.client.train(**args), first)
        self.assertEqual([j.name for j in self.client.list_jobs(label_selector=f"retry={label}")], [first])

    def test_schedule(self) -> None:
        runtime, trainer = manifest_run()
        name = f"sdk-py-weekly-{uuid.uuid4().hex[:5]}"
        self.addCleanup(self.delete_schedule, name)
        s = self.client.create_schedule(
            name,
            "0 2 * * 0",
            runtime,
            trainer,
            time_zone="Europe/Berlin",
            concurrency_policy="Forbid",
            successful_jobs_history_limit=2,
            failed_jobs_history_limit=1,
            queue=QUEUE,
            active_deadline_seconds=43200,
        )
        self.assertEqual((s.name, s.schedule, s.time_zone, s.concurrency_policy, s.suspend), (name, "0 2 * * 0", "Europe/Berlin", "Forbid", False))
        self.assertEqual((s.successful_jobs_history_limit, s.failed_jobs_history_limit, s.active_deadline_seconds), (2, 1, 43200))
        self.assertEqual((s.runtime, s.num_nodes, s.queue), (runtime, trainer.num_nodes, QUEUE))
        self.assertIsNotNone(s.next_schedule_time)
        nxt = s.next_schedule_time.astimezone(ZoneInfo("Europe/Berlin"))
        self.assertEqual((nxt.strftime("%A"), nxt.hour, nxt.minute), ("Sunday", 2, 0), f"next run {nxt}: want a Sunday at 02:00 in Berlin")
        # Lists read the server's cache, which sees the new schedule a moment later.
        self.eventually(lambda: name in [x.name for x in self.client.list_schedules()])

        s = self.client.suspend_schedule(name)
        self.assertEqual((s.suspend, s.next_schedule_time), (True, None))
        s = self.client.resume_schedule(name)
        self.assertFalse(s.suspend)
        self.assertIsNotNone(s.next_schedule_time)

        run = self.client.trigger_schedule(name)
        self.names.append(run)
        self.assertTrue(run.startswith(name + "-"), run)
        self.eventually(lambda: [j.name for j in self.client.list_schedule_runs(name)] == [run])

        self.client.delete_schedule(name)

        def gone() -> bool:
            try:
                self.client.get_schedule(name)
            except kiln.NotFoundError:
                return True
            return False

        self.eventually(gone)
        with self.assertRaises(kiln.NotFoundError):
            self.client.get_schedule(name)

    def delete_schedule(self, name: str) -> None:
        try:
            self.client.delete_schedule(name)
        except kiln.NotFoundError:
            pass


if __name__ == "__main__":
    unittest.main()
