// Package render turns a TrainJob and its runtime into the JobSet (and the MPI Secret and
// hostfile ConfigMap) that run it. It renders what Kubeflow Trainer v2.3 renders for the same
// inputs, so Kueue, which computes a TrainJob's quota with upstream's builder, sees the same
// replicated jobs, pod counts and resource requests. Rendering is pure: no API calls.
package render
