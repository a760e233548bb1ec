/*
 * watch.c — the watch stream parser: a response body of JSON event objects,
 * fed in chunks split anywhere (curl's write callback), decoded one event at
 * a time.
 *
 * Framing does not trust newlines: a tiny scanner follows strings (with
 * escapes) and bracket depth to find where each top-level object ends, as
 * client-go's JSON framer does. A complete event inside one chunk is decoded
 * in place; only an event split across chunks is copied, into a buffer
 * capped at max_event. So the cost is one pass over the bytes plus one
 * jansson parse per event, whatever the chunking.
 *
 * Positions in messages are byte offsets in the stream. After any non-zero
 * result (an error, 410 Gone, or the callback's stop value) the parser is
 * done and returns that same value from then on.
 */
#include "kube_int.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pd_kube_watch_parser {
	pd_kube_event_fn fn;
	void *ctx;
	size_t max;
	struct pd_buf buf;  /* the current event's bytes from earlier chunks */
	bool in_value, in_str, esc;
	size_t depth;
	uint64_t offset;    /* stream bytes before the current chunk */
	uint64_t ev_start;  /* stream offset of the current event */
	size_t events;
	int done;
};

int pd_kube_watch_parser_new(size_t max_event, pd_kube_event_fn fn, void *ctx, struct pd_kube_watch_parser **out)
{
	struct pd_kube_watch_parser *p = calloc(1, sizeof *p);
	*out = p;
	if (!p)
		return PD_ENOMEM;
	p->fn = fn;
	p->ctx = ctx;
	p->max = max_event ? max_event : PD_KUBE_MAX_EVENT_BYTES;
	p->buf.max = p->max;
	return 0;
}

void pd_kube_watch_parser_free(struct pd_kube_watch_parser *p)
{
	if (!p)
		return;
	pd_buf_free(&p->buf);
	free(p);
}

size_t pd_kube_watch_events(const struct pd_kube_watch_parser *p) { return p->events; }

static int decode(struct pd_kube_watch_parser *p, const char *s, size_t n, struct pd_err *err)
{
	char where[80];
	snprintf(where, sizeof where, "watch stream: event at byte %" PRIu64, p->ev_start);
	json_error_t je;
	json_t *root = json_loadb(s, n, 0, &je);
	if (!root)
		return kube_json_error(err, where, &je);
	struct pd_arena *a = NULL;
	struct pd_kube_pod pod;
	struct pd_kube_event ev = {0};
	int rc = 0;
	json_t *t = json_object_get(root, "type"), *obj = json_object_get(root, "object");
	if (!json_is_string(t)) {
		rc = pd_errf(err, PD_EINVAL, "%s: type: missing or not a string", where);
		goto out;
	}
	if (!json_is_object(obj)) {
		rc = pd_errf(err, PD_EINVAL, "%s: object: missing or not an object", where);
		goto out;
	}
	const char *ts = json_string_value(t);
	if (strcmp(ts, "ADDED") == 0)
		ev.type = PD_KUBE_ADDED;
	else if (strcmp(ts, "MODIFIED") == 0)
		ev.type = PD_KUBE_MODIFIED;
	else if (strcmp(ts, "DELETED") == 0)
		ev.type = PD_KUBE_DELETED;
	else if (strcmp(ts, "BOOKMARK") == 0)
		ev.type = PD_KUBE_BOOKMARK;
	if (ev.type == PD_KUBE_BOOKMARK) {
		json_t *md = json_object_get(obj, "metadata"), *rv = json_object_get(md, "resourceVersion");
		if (!json_is_string(rv) || !json_string_length(rv)) {
			rc = pd_errf(err, PD_EINVAL, "%s: BOOKMARK without object.metadata.resourceVersion", where);
			goto out;
		}
		ev.resource_version = json_string_value(rv);
	} else if (ev.type) {
		if (!(a = pd_arena_new(8192))) {
			rc = pd_errf(err, PD_ENOMEM, "%s: out of memory", where);
			goto out;
		}
		if ((rc = kube_pod_from_json(obj, a, &pod, where, err)) && (rc = kube_pod_invalid(obj, a, &pod, rc, err)))
			goto out;
		ev.pod = &pod;
		ev.resource_version = pod.resource_version ? pod.resource_version : "";
	} else if (strcmp(ts, "ERROR") == 0) {
		long code;
		const char *reason, *msg;
		kube_status_fields(obj, &code, &reason, &msg);
		rc = pd_errf(err, code == 410 ? PD_KUBE_EGONE : PD_KUBE_EHTTP, "watch: ERROR event: %ld %s: %.300s", code,
			     reason ? reason : "", msg ? msg : "(no message)");
		goto out;
	} else {
		rc = pd_errf(err, PD_EINVAL, "%s: unknown event type \"%.32s\"", where, ts);
		goto out;
	}
	p->events++;
	rc = p->fn(p->ctx, &ev, err);
out:
	pd_arena_free(a);
	json_decref(root);
	return rc;
}

static bool ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

int pd_kube_watch_feed(struct pd_kube_watch_parser *p, const void *data, size_t len, struct pd_err *err)
{
	if (p->done)
		return p->done;
	const unsigned char *d = data;
	size_t i = 0;
	int rc = 0;
	while (i < len) {
		size_t seg = i;
		if (!p->in_value) {
			if (ws(d[i])) {
				i++;
				continue;
			}
			if (d[i] != '{') {
				rc = pd_errf(err, PD_EINVAL, "watch stream: byte %" PRIu64 ": expected '{' (an event object), got 0x%02x",
					     p->offset + i, d[i]);
				goto out;
			}
			p->in_value = true;
			p->depth = 1;
			p->in_str = p->esc = false;
			p->ev_start = p->offset + i;
			i++;
		}
		bool complete = false;
		for (; i < len; i++) {
			unsigned char c = d[i];
			if (p->in_str) {
				if (p->esc)
					p->esc = false;
				else if (c == '\\')
					p->esc = true;
				else if (c == '"')
					p->in_str = false;
			} else if (c == '"') {
				p->in_str = true;
			} else if (c == '{' || c == '[') {
				p->depth++;
			} else if ((c == '}' || c == ']') && --p->depth == 0) {
				i++;
				complete = true;
				break;
			}
		}
		if (p->buf.len + (i - seg) > p->max) {
			rc = pd_errf(err, PD_ELIMIT, "watch stream: event at byte %" PRIu64 " is over the %zu-byte limit",
				     p->ev_start, p->max);
			goto out;
		}
		if (!complete) {
			if ((rc = pd_buf_append(&p->buf, d + seg, i - seg))) {
				pd_errf(err, rc, "watch stream: out of memory");
				goto out;
			}
			break;
		}
		p->in_value = false;
		if (p->buf.len == 0) {
			rc = decode(p, (const char *)d + seg, i - seg, err);
		} else {
			if ((rc = pd_buf_append(&p->buf, d + seg, i - seg))) {
				pd_errf(err, rc, "watch stream: out of memory");
				goto out;
			}
			rc = decode(p, (const char *)p->buf.ptr, p->buf.len, err);
			p->buf.len = 0;
		}
		if (rc)
			goto out;
	}
out:
	p->offset += len;
	if (rc)
		p->done = rc;
	return rc;
}

int pd_kube_watch_finish(struct pd_kube_watch_parser *p, struct pd_err *err)
{
	if (p->done)
		return p->done;
	if (p->in_value)
		return p->done = pd_errf(err, PD_EINVAL, "watch stream: ended inside the event at byte %" PRIu64
					 " (%zu bytes received)", p->ev_start, p->buf.len);
	return 0;
}
