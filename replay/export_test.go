package replay

// CorpusSession exposes the corpus recorder to the external tests.
var CorpusSession = corpusSession

// RecordedFrames exposes recordedFrames to the external tests.
var RecordedFrames = recordedFrames

// RecordedEvents exposes recordedEvents to the external tests.
var RecordedEvents = recordedEvents
