package journalcheck

// Rule ids: stable short names a violation carries. docs/journal-check.md
// explains each; TestRulesDocumented holds the two together.
const (
	// Structure of the journal.
	RuleSeqGap        = "seq-gap"        // seqs are not gap-free and increasing from the first
	RuleUnreadable    = "unreadable"     // the store cannot serve the journal past this seq
	RuleRecordDecode  = "record-decode"  // a body that does not decode as its kind, or an unknown kind
	RuleTruncated     = "truncated"      // a dropped prefix and no usable snapshot to start after it
	RuleManifestFirst = "manifest-first" // a record that needs a manifest before the first one

	// Steps and what they consume.
	RuleStepInput        = "step-input"         // a step or fault consumes what was not next in its instance's mailbox
	RuleStepAfterFailure = "step-after-failure" // a step or fault for a failed instance before a recover
	RuleStepOutput       = "step-output"        // the events and intents a step lists do not follow it
	RuleUndelivered      = "undelivered"        // a delivery no step or fault consumed before the next input
	RuleEventOrigin      = "event-origin"       // an emitted event that does not match the step before it
	RuleFaultClass       = "fault-class"        // a fault of an unknown class

	// Stamps.
	RuleStampHeight   = "stamp-height"   // a stamp's height is not the journal height before its record
	RuleStampTime     = "stamp-time"     // a fresh stamp's logical time does not rise
	RuleStampManifest = "stamp-manifest" // a fresh stamp names another manifest than the current one
	RuleStampChild    = "stamp-child"    // an emitted event's stamp is not derived from its step's input

	// Intents, receipts, drops and frames.
	RuleIntentHash           = "intent-hash"            // an intent's hash is not the hash of its identity, or not the one its step lists
	RuleIntentOrigin         = "intent-origin"          // an intent's origin is not the step that opened it
	RuleIntentDuplicate      = "intent-duplicate"       // an intent opened while pending or recently settled
	RuleReceiptUnknownIntent = "receipt-unknown-intent" // a receipt for an intent not pending and not recently settled
	RuleReceiptTwice         = "receipt-twice"          // a receipt for an intent a receipt already settled
	RuleReceiptAfterFailure  = "receipt-after-failure"  // a receipt for an intent its instance's failure settled
	RuleReceiptEffect        = "receipt-effect"         // a receipt for another effect than its intent's
	RuleDropPending          = "drop-pending"           // a receipt dropped although its intent was pending
	RuleDropDelivered        = "drop-delivered"         // a step consumes a drop record
	RuleFrameNotPending      = "frame-not-pending"      // a stream frame for an intent not pending
	RuleFrameSeqNotRising    = "frame-seq-not-rising"   // a stream frame whose seq does not rise for its intent
	RuleFrameEffect          = "frame-effect"           // a stream frame for another effect than its intent's
	RuleCancelNotPending     = "cancel-not-pending"     // an operator's cancel of an intent that is not pending
	RuleCancelMismatch       = "cancel-mismatch"        // a cancel that names another effect or origin than its intent's
	RuleReceiptAfterCancel   = "receipt-after-cancel"   // a receipt for an intent an operator's cancel settled

	// World-level records.
	RuleApplyNotQuiescent  = "apply-not-quiescent" // a manifest applied while work was running or intents in flight
	RuleRecoverNotFailed   = "recover-not-failed"  // a recover for an instance that is not failed
	RuleRecoverStaleFault  = "recover-stale-fault" // a recover that answers another fault than the current one
	RuleRecoverMismatch    = "recover-mismatch"    // a recover whose input or skipped count is not its fault's
	RuleRecoverAction      = "recover-action"      // an unknown action, or a retry with nothing to deliver again
	RuleModuleAction       = "module-action"       // an unknown module action, a module set aside twice, a resume of one not set aside
	RuleModuleResume       = "module-resume"       // a resume whose workflows or parked count are not what the module held
	RuleSnapshotCheckpoint = "snapshot-checkpoint" // a snapshot that does not name the latest checkpoint, or names it twice
	RuleWorldRecord        = "world-record"        // a second world record, or one whose identity is not one
	RuleWorldBinding       = "world-binding"       // an intent, receipt, drop or frame that names another world than the journal's
	RuleMove               = "move"                // a move to a manifest that is not current, or from one that is not live, or of an instance with work under way
)

// Rules lists every rule id, in the order docs/journal-check.md explains
// them.
func Rules() []string {
	return []string{
		RuleSeqGap, RuleUnreadable, RuleRecordDecode, RuleTruncated, RuleManifestFirst,
		RuleStepInput, RuleStepAfterFailure, RuleStepOutput, RuleUndelivered, RuleEventOrigin, RuleFaultClass,
		RuleStampHeight, RuleStampTime, RuleStampManifest, RuleStampChild,
		RuleIntentHash, RuleIntentOrigin, RuleIntentDuplicate,
		RuleReceiptUnknownIntent, RuleReceiptTwice, RuleReceiptAfterFailure, RuleReceiptEffect,
		RuleDropPending, RuleDropDelivered,
		RuleFrameNotPending, RuleFrameSeqNotRising, RuleFrameEffect,
		RuleCancelNotPending, RuleCancelMismatch, RuleReceiptAfterCancel,
		RuleApplyNotQuiescent,
		RuleRecoverNotFailed, RuleRecoverStaleFault, RuleRecoverMismatch, RuleRecoverAction,
		RuleModuleAction, RuleModuleResume,
		RuleSnapshotCheckpoint, RuleWorldRecord, RuleWorldBinding, RuleMove,
	}
}
