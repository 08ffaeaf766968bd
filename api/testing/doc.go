// Package testing is what Kiln's tests share across modules: builders of the API's objects in
// the style of JobSet's and Kueue's test wrappers (MakeTrainJob(name, ns).Suspend(true).Obj()).
// Import it as kilntesting. Its subpackages: pinned locates the upstream modules pinned under
// tools/, envtest starts the control plane the integration suites share. Only tests (and pinned, the e2e harness) import them.
package testing
