package reducer

import (
	"github.com/threadcast/threadcast/codec"
	"github.com/threadcast/threadcast/jsondoc"
)

// Activity (activity.md). Neither event closes a chunk stream.

// activitySnapshot creates or replaces one activity message. A replacing
// snapshot (replace absent or true) takes the snapshot's content, type and
// attribution — becoming unattributed if untagged — and keeps the metadata
// accumulated so far; replace:false leaves content, type and owner alone.
// The snapshot's metadata merges in either case (metadata.md §6).
func (t *Thread) activitySnapshot(e *codec.Event) *ProtocolError {
	id, tag := e.MessageID, ownerOf(e)
	ex := t.byID.at(id)
	key := t.keyFor(ex, id)
	// The snapshot's tag becomes the activity's owner when it creates the
	// message (whatever replace says, §1 rule 2) or replaces it; replace:
	// false on an activity keeps the established owner (the stored
	// message's, when this run has recorded none), and on a message of
	// another role leaves everything alone.
	switch _, known := t.m.ownActivity.get(id); {
	case ex == nil:
		// A new message: no owner map records its id (a dropped message's
		// records went with it), so there is nothing else to replace.
		t.m.ownActivity.put(key, t.internOwner(tag))
	case e.Replace:
		t.m.remint(&t.m.ownActivity, key, t.internOwner(tag))
	case ex.role == roleActivity && !known:
		t.m.ownActivity.put(key, ex.owner)
	}
	switch {
	case ex == nil:
		m, err := t.newActivity(e, key, tag)
		if err != nil {
			return err
		}
		t.appendMessage(m)
	case ex.role == roleActivity:
		if e.Replace {
			if ex.doc == nil {
				ex.doc, ex.hasContent = new(jsondoc.Doc), true
			}
			if err := ex.doc.SetDecoded(e.Content); err != nil {
				return t.violation("P9", "ACTIVITY_SNAPSHOT.content is not JSON: "+err.Error())
			}
			if ex.activityType != e.ActivityType {
				ex.activityType = retain(e.ActivityType)
			}
			ex.owner = t.internOwner(tag)
		}
		mergeMeta(&ex.meta, e.Metadata)
		t.j.replaced(ex)
	case e.Replace:
		// Not specified; the reference turns the message into a fresh
		// activity message in place (activity.md §4, last paragraph).
		m, err := t.newActivity(e, ex.id, tag)
		if err != nil {
			return err
		}
		m.idx = ex.idx
		t.msgs[ex.idx] = m
		t.reindex()
		t.j.structural() // the old message is gone: re-read (and re-measure) the list
	}
	return nil
}

func (t *Thread) newActivity(e *codec.Event, id string, tag owner) (*message, *ProtocolError) {
	doc, err := jsondoc.ParseDecoded(e.Content)
	if err != nil {
		return nil, t.violation("P9", "ACTIVITY_SNAPSHOT.content is not JSON: "+err.Error())
	}
	m := &message{id: id, role: roleActivity, hasContent: true, doc: doc,
		activityType: retain(e.ActivityType), owner: t.internOwner(tag)}
	mergeMeta(&m.meta, e.Metadata)
	return m, nil
}

// activityDelta patches one activity message's content and re-types it. A
// missing or non-activity target is skipped with a warning (P6); otherwise a
// tag disagreeing with the owner is fatal (A1); a patch that does not apply is
// skipped with a warning, the type unchanged (P3). Metadata merges before the
// patch is tried, as the reference does.
func (t *Thread) activityDelta(e *codec.Event) *ProtocolError {
	id, tag := e.MessageID, ownerOf(e)
	// The target first: a delta naming no activity message is skipped and
	// MUST NOT fail the run (§2 rule 4), whatever its tag says.
	ex := t.byID.at(id)
	if ex == nil {
		t.warn(WarnActivityMissing, "ACTIVITY_DELTA for unknown message "+quote(id)+"; skipped")
		return nil
	}
	if ex.role != roleActivity {
		t.warn(WarnActivityNotActive, "ACTIVITY_DELTA for "+ex.role.String()+" message "+quote(id)+"; skipped")
		return nil
	}
	if rec, ok := t.m.ownActivity.get(id); ok && !sameOwner(tag, rec) {
		return t.violation("A1", "ACTIVITY_DELTA tagged "+tag.String()+" but activity "+quote(id)+" is owned by "+rec.String())
	}
	mergeMeta(&ex.meta, e.Metadata)
	t.j.replaced(ex)
	if ex.doc == nil { // an activity restated without content: patch {}
		ex.doc, ex.hasContent = parseOrNull([]byte("{}")), true
	}
	// The content must stay an object: a patch making it anything else is a
	// producer violation (activity.md §2, "consumer need not detect"). Left
	// in, it would make a view that no ACTIVITY_SNAPSHOT or
	// MESSAGES_SNAPSHOT can state, so checkpoints, late joiners and
	// compacted frames could not carry it: it is skipped like a patch that
	// does not apply, with a warning.
	if err := ex.doc.ApplyObjectDecoded(e.Patch); err != nil {
		return t.patchFailed("activity "+quote(id), err)
	}
	if ex.activityType != e.ActivityType {
		ex.activityType = retain(e.ActivityType)
	}
	return nil
}
