// Package controller is what the operator's controllers share: the manager's cache and
// client options, and how a TrainJob's resume is read from its managedFields. Each kind's
// controller has a package of its own beside it: trainjob, crontrainjob.
package controller
