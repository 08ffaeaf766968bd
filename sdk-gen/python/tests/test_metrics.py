"""A job's progress and metrics on the wire: what the client sends, and what it makes of the
server's answers, against a local Connect server that answers as the API server does (unary
calls in JSON, streams in Connect's envelopes)."""

import unittest
from datetime import datetime, timedelta, timezone
from typing import Any, Dict, List

import kiln
from kiln import v1
from tests.connectserver import Server

SERVICE = "/kiln.v1.TrainJobService/"
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)

# A running job's progress as the API server answers it: 45% at step 450 of 1000, a checkpoint
# at step 400, a progress deadline of 15 minutes.
PROGRESS: Dict[str, Any] = {
    "percent": 45,
    "etaSeconds": 190,
    "metrics": [{"name": "step", "value": "450"}, {"name": "total_steps", "value": "1000"}, {"name": "loss", "value": "0.5321"}],
    "updateTime": "2026-11-23T12:00:00Z",
    "step": "450",
    "totalSteps": "1000",
    "checkpoint": {"step": "400", "path": "s3://ckpt/llm/step-400"},
    "progressDeadlineSeconds": "900",
    "stallTime": "2026-11-23T12:15:00Z",
}


def at(seconds: int) -> str:
    return (T0 + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


def loss(*seconds: int) -> Dict[str, Any]:
    """The loss series at those seconds after T0, each at step 10 times it (int64: a JSON string)."""
    return {"name": "loss", "stride": "1", "points": [{"time": at(s), "step": str(10 * s), "value": 3 - s / 10} for s in seconds]}


def points(*seconds: int) -> List[kiln.MetricPoint]:
    return [kiln.MetricPoint(time=T0 + timedelta(seconds=s), step=10 * s, value=3 - s / 10) for s in seconds]


def history(*series: Dict[str, Any]) -> Dict[str, Any]:
    return {"history": {"series": list(series)}}


def new_points(*series: Dict[str, Any]) -> Dict[str, Any]:
    return {"points": {"series": list(series)}}


FINISHED = {"finished": {"state": "STATE_COMPLETE", "reason": "AllJobsCompleted"}}


def client(url: str) -> kiln.TrainerClient:
    return kiln.TrainerClient(url, token="t0ken", namespace="default", config_file="/nonexistent/kiln.yaml")


class ProgressTest(unittest.TestCase):
    def test_a_reporting_job(self) -> None:
        job = kiln.TrainJob.from_proto(v1.TrainJob.from_dict({"name": "llm", "status": {"state": "STATE_RUNNING", "progress": PROGRESS}}))
        p = job.progress
        assert p is not None
        self.assertIsInstance(p, kiln.Progress)
        self.assertEqual((p.percent, p.eta_seconds, p.step, p.total_steps), (45, 190, 450, 1000))
        # In the trainer's order, as reported (strings).
        self.assertEqual(list(p.metrics.items()), [("step", "450"), ("total_steps", "1000"), ("loss", "0.5321")])
        self.assertEqual(job.metrics, p.metrics)
        self.assertEqual(p.update_time, T0)
        self.assertEqual(p.checkpoint, kiln.Checkpoint(step=400, path="s3://ckpt/llm/step-400"))
        self.assertEqual((p.progress_deadline_seconds, p.stall_time), (900, T0 + timedelta(minutes=15)))

    def test_a_job_that_reported_little_or_nothing(self) -> None:
        quiet = kiln.TrainJob.from_proto(v1.TrainJob.from_dict({"name": "quiet", "status": {"state": "STATE_RUNNING"}}))
        self.assertEqual((quiet.progress, quiet.metrics), (None, {}))
        # Steps only: no percent, no ETA, no checkpoint, no deadline: None, not 0.
        p = kiln.TrainJob.from_proto(v1.TrainJob.from_dict({"status": {"progress": {"step": "1200", "metrics": [{"name": "step", "value": "1200"}]}}})).progress
        assert p is not None
        self.assertEqual((p.percent, p.eta_seconds, p.step, p.total_steps, p.checkpoint, p.progress_deadline_seconds, p.stall_time), (None, None, 1200, None, None, None, None))

    def test_exported(self) -> None:
        for name in ("Progress", "MetricPoint", "Checkpoint"):
            self.assertIn(name, kiln.__all__)


class MetricsWireTest(unittest.TestCase):
    def test_get_job_metrics(self) -> None:
        lr = {"name": "learning_rate", "stride": "2", "points": [{"time": at(1), "value": 0.0003}]}
        with Server({"GetTrainJobMetrics": (200, {"series": [loss(1, 2, 3), lr], "reports": "3", "updateTime": at(3)})}) as srv:
            got = client(srv.url).get_job_metrics("llm", ["loss", "learning_rate"])
        self.assertEqual(got, {"loss": points(1, 2, 3), "learning_rate": [kiln.MetricPoint(time=T0 + timedelta(seconds=1), step=None, value=0.0003)]})
        self.assertEqual(srv.bodies("GetTrainJobMetrics"), [{"namespace": "default", "name": "llm", "metrics": ["loss", "learning_rate"]}])
        self.assertEqual(srv.received[0]["headers"]["Authorization"], "Bearer t0ken")

    def test_get_job_metrics_of_a_job_without_history(self) -> None:
        with Server({"GetTrainJobMetrics": (200, {})}) as srv:
            self.assertEqual(client(srv.url).get_job_metrics("llm", "loss", namespace="team-a"), {"loss": []})
        self.assertEqual(srv.bodies("GetTrainJobMetrics"), [{"namespace": "team-a", "name": "llm", "metrics": ["loss"]}])

    def test_every_metric_named_is_there_before_its_first_report(self) -> None:
        with Server({"GetTrainJobMetrics": (200, {"series": [loss(1)]})}) as srv:
            got = client(srv.url).get_job_metrics("llm", ["loss", "accuracy"])
        self.assertEqual(got, {"loss": points(1), "accuracy": []})
        with Server({"GetTrainJobMetrics": (200, {})}) as srv:
            self.assertEqual(client(srv.url).get_job_metrics("llm"), {})

    def test_an_older_server(self) -> None:
        with Server({}) as srv:
            with self.assertRaises(kiln.UnimplementedError):
                client(srv.url).get_job_metrics("llm")

    def test_watch_the_history_then_each_report_until_the_job_finishes(self) -> None:
        with Server(streams=[{"messages": [history(loss(1, 2)), new_points(loss(3)), new_points(loss(4)), FINISHED]}]) as srv:
            got = list(client(srv.url).watch_job_metrics("llm", ["loss"]))
        self.assertEqual(got, [{"loss": points(1, 2)}, {"loss": points(3)}, {"loss": points(4)}])
        self.assertEqual(srv.bodies("WatchTrainJobMetrics"), [{"namespace": "default", "name": "llm", "metrics": ["loss"]}])
        self.assertEqual(srv.received[0]["headers"]["Content-Type"], "application/connect+json")

    def test_watch_resumes_a_dropped_stream_yielding_only_what_is_new(self) -> None:
        streams = [
            {"messages": [history(loss(1, 2)), new_points(loss(3))], "drop": True},
            {"messages": [], "end": {"code": "unavailable", "message": "server shutting down"}},
            # The history again, resampled meanwhile: point 2 is gone, 4 is new.
            {"messages": [history(loss(1, 3, 4)), FINISHED]},
        ]
        with Server(streams=streams) as srv:
            got = list(client(srv.url).watch_job_metrics("llm"))
        self.assertEqual(got, [{"loss": points(1, 2)}, {"loss": points(3)}, {"loss": points(4)}])
        self.assertEqual(len(srv.bodies("WatchTrainJobMetrics")), 3)

    def test_watch_an_empty_history_comes_first(self) -> None:
        with Server(streams=[{"messages": [history(), FINISHED]}]) as srv:
            self.assertEqual(list(client(srv.url).watch_job_metrics("llm")), [{}])

    def test_watch_an_error_that_retrying_does_not_mend(self) -> None:
        with Server(streams=[{"messages": [], "end": {"code": "permission_denied", "message": "may not get trainjobmetrics"}}]) as srv:
            with self.assertRaises(kiln.PermissionDeniedError) as cm:
                list(client(srv.url).watch_job_metrics("llm"))
        self.assertEqual(cm.exception.message, "may not get trainjobmetrics")
        self.assertEqual(len(srv.bodies("WatchTrainJobMetrics")), 1)

    def test_watch_stops_when_the_caller_does(self) -> None:
        with Server(streams=[{"messages": [history(loss(1)), new_points(loss(2)), FINISHED]}]) as srv:
            for pts in client(srv.url).watch_job_metrics("llm"):
                self.assertEqual(pts, {"loss": points(1)})
                break
        self.assertEqual(len(srv.bodies("WatchTrainJobMetrics")), 1)


if __name__ == "__main__":
    unittest.main()
