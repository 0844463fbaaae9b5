// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * io-fault.c - fault injection between the writeback engine and a backend
 *
 * Every backend asks pwb__fault_check() once per request, before the
 * request's first write reaches the device (through pwb__io_fault_check in
 * io.c), so one rule wraps psync and io_uring alike. Reads of
 * library-owned pages ask pwb__fault_check_read() the same way, once per
 * device read; only a read rule (PWB_FAULT_READ_EIO, PWB_FAULT_READ_DELAY)
 * hits them, and it hits no write. The rule and its
 * counters live in one struct pwb__fault_state, published in bdi->fault
 * with RCU:
 *
 *   - pwb_bdi_inject_fault() builds a new state, swaps it in with
 *     an atomic exchange (so concurrent callers need no lock; the last one
 *     wins) and frees the old one with call_rcu() after a grace period;
 *   - pwb__fault_check() runs on any flusher: with no rule it is a single
 *     load of bdi->fault; otherwise it reads the state under rcu_read_lock
 *     and moves the counters with uatomic operations only.
 *
 * Counting: a write "matches" when it overlaps the rule's device range (and,
 * for a short-write rule, is longer than one logical block: a one-block
 * O_DIRECT write cannot be split, so it is not a candidate at all). The
 * n-th match (1-based, from the inject call) is the unit of nth, every and
 * the seeded pseudo-random draw, which is a pure function of (seed, n): a
 * single flusher sees the same hits in every run.
 */
#include "base.h"
#include "io.h"
#include "bdi.h"

#include <ctype.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

struct pwb__fault_state {
	struct pwb_fault rule;	/* validated copy; dev_end 0 -> UINT64_MAX */
	uint64_t matches;	/* uatomic: writes that matched the range */
	uint64_t hits;		/* uatomic: writes hit, capped by max_hits */
	struct rcu_head rcu;
};

/* splitmix64: a good 64-bit mix, so that consecutive n draw independently. */
static uint64_t fault_mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* Does match number @n (1-based) fall under nth, every or ppm? */
static bool fault_selects(const struct pwb_fault *r, uint64_t n)
{
	if (r->nth && n == r->nth)
		return true;
	if (r->every && n % r->every == 0)
		return true;
	if (r->ppm &&
	    fault_mix(r->seed ^ fault_mix(n)) % 1000000u < r->ppm)
		return true;
	return false;
}

/* Take one hit within max_hits; false once the cap is reached. */
static bool fault_take_hit(struct pwb__fault_state *fs)
{
	uint64_t old, max = fs->rule.max_hits;

	if (!max) {
		uatomic_inc(&fs->hits);
		return true;
	}
	old = pwb__aread(&fs->hits);
	while (old < max) {
		uint64_t prev = uatomic_cmpxchg(&fs->hits, old, old + 1);

		if (prev == old)
			return true;
		old = prev;
	}
	return false;
}

/* Half of @len, rounded down to whole blocks of @lbs, at least one block.
 * Caller made sure @len is longer than one block. */
static uint64_t fault_short_len(uint64_t len, unsigned int lbs)
{
	uint64_t half = len / 2;

	half -= half % lbs;
	return half ? half : lbs;
}

static void fault_sleep_ms(unsigned int ms)
{
	struct timespec ts = {
		.tv_sec = ms / 1000,
		.tv_nsec = (long)(ms % 1000) * 1000000L,
	};

	/* A signal must not cut the delay short: the rule promised it. */
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

enum pwb__fault_action pwb__fault_check(struct pwb_bdi *bdi, uint64_t dev_off,
					uint64_t len, int *err,
					uint64_t *short_len)
{
	enum pwb__fault_action act = PWB__FAULT_PASS;
	struct pwb__fault_state *fs;
	unsigned int delay_ms = 0;
	uint64_t n;

	/* The common case, no rule: one load, no RCU read-side section. The
	 * pointer is only tested here; it is dereferenced below, under
	 * rcu_read_lock, after a fresh rcu_dereference. */
	if (caa_likely(!pwb__aread(&bdi->fault)))
		return PWB__FAULT_PASS;

	rcu_read_lock();
	fs = PWB__RCU_DEREF(bdi->fault);
	if (!fs)
		goto out;
	if (dev_off >= fs->rule.dev_end || dev_off + len <= fs->rule.dev_start)
		goto out;	/* [dev_off, dev_off + len) misses the range */
	if (fs->rule.kind == PWB_FAULT_SHORT && len <= bdi->lbs)
		goto out;	/* cannot be split: not a candidate */
	if (fs->rule.kind == PWB_FAULT_READ_EIO ||
	    fs->rule.kind == PWB_FAULT_READ_DELAY)
		goto out;	/* a rule for reads */
	n = uatomic_add_return(&fs->matches, 1);
	if (!fault_selects(&fs->rule, n) || !fault_take_hit(fs))
		goto out;
	uatomic_inc(&bdi->fault_hits);

	switch (fs->rule.kind) {
	case PWB_FAULT_EIO:
		*err = -EIO;
		act = PWB__FAULT_FAIL;
		break;
	case PWB_FAULT_ENOSPC:
		*err = -ENOSPC;
		act = PWB__FAULT_FAIL;
		break;
	case PWB_FAULT_SHORT:
		*short_len = fault_short_len(len, bdi->lbs);
		act = PWB__FAULT_SHORT;
		break;
	case PWB_FAULT_DELAY:
		delay_ms = fs->rule.delay_ms;
		break;
	default:
		break;
	}
out:
	pwb__rcu_read_unlock();
	/* Sleep outside the read-side section: a long delay must not hold
	 * up the grace period that frees a replaced rule. */
	if (delay_ms)
		fault_sleep_ms(delay_ms);
	return act;
}

/*
 * The read rules for a device read of @len bytes at @dev_off: 0, -EIO
 * (PWB_FAULT_READ_EIO hit), or after a PWB_FAULT_READ_DELAY hit's sleep
 * 0. @nowait: a read-delay rule that covers the range and may still hit
 * gives -EAGAIN at once, before the read is counted as a match: a
 * submitter that must not sleep leaves the read to one that may, and
 * takes no hit from it (nth and every count the reads that were made).
 */
static int check_read(struct pwb_bdi *bdi, uint64_t dev_off, uint64_t len,
		      bool nowait)
{
	struct pwb__fault_state *fs;
	unsigned int delay_ms = 0;
	int err = 0;

	if (caa_likely(!pwb__aread(&bdi->fault)))
		return 0;
	rcu_read_lock();
	fs = PWB__RCU_DEREF(bdi->fault);
	if (!fs || (fs->rule.kind != PWB_FAULT_READ_EIO &&
		    fs->rule.kind != PWB_FAULT_READ_DELAY) ||
	    dev_off >= fs->rule.dev_end || dev_off + len <= fs->rule.dev_start)
		goto out;
	if (nowait && fs->rule.kind == PWB_FAULT_READ_DELAY &&
	    fs->rule.delay_ms &&
	    (!fs->rule.max_hits ||
	     pwb__aread(&fs->hits) < fs->rule.max_hits)) {
		err = -EAGAIN;
		goto out;
	}
	if (fault_selects(&fs->rule, uatomic_add_return(&fs->matches, 1)) &&
	    fault_take_hit(fs)) {
		uatomic_inc(&bdi->fault_hits);
		if (fs->rule.kind == PWB_FAULT_READ_EIO)
			err = -EIO;
		else
			delay_ms = fs->rule.delay_ms;
	}
out:
	pwb__rcu_read_unlock();
	/* Outside the section, as a write's delay. */
	if (delay_ms)
		fault_sleep_ms(delay_ms);
	return err;
}

int pwb__fault_check_read(struct pwb_bdi *bdi, uint64_t dev_off, uint64_t len)
{
	return check_read(bdi, dev_off, len, false);
}

int pwb__fault_check_read_nowait(struct pwb_bdi *bdi, uint64_t dev_off,
				 uint64_t len)
{
	return check_read(bdi, dev_off, len, true);
}

static void fault_free_rcu(struct rcu_head *head)
{
	struct pwb__fault_state *st =
		caa_container_of(head, struct pwb__fault_state, rcu);

	pwb__rcu_callback_begin(st);
	free(st);
}

void pwb__fault_destroy(struct pwb_bdi *bdi)
{
	struct pwb__fault_state *old = __atomic_exchange_n(&bdi->fault, NULL, __ATOMIC_ACQ_REL);

	/* Called once the flushers have stopped: nothing reads it any more,
	 * so there is no grace period to wait for. */
	free(old);
}

static const char *const kind_names[] = {
	[PWB_FAULT_NONE] = "none",
	[PWB_FAULT_EIO] = "eio",
	[PWB_FAULT_ENOSPC] = "enospc",
	[PWB_FAULT_SHORT] = "short",
	[PWB_FAULT_DELAY] = "delay",
	[PWB_FAULT_READ_EIO] = "read_eio",
	[PWB_FAULT_READ_DELAY] = "read_delay",
};
#define NR_KINDS (sizeof(kind_names) / sizeof(kind_names[0]))

/* The checks shared by pwb_bdi_inject_fault() and pwb_fault_parse(), so
 * that a spec that parses is also one that can be injected. */
static int fault_validate(const struct pwb_fault *f, const char *who)
{
	if ((unsigned int)f->kind >= NR_KINDS)
		return pwb__err(-EINVAL, "%s: unknown fault kind %d", who,
				(int)f->kind);
	if (f->kind == PWB_FAULT_NONE)
		return 0;
	if (!f->nth && !f->every && !f->ppm)
		return pwb__err(-EINVAL, "%s: a %s rule with no nth, every or "
					 "ppm can never hit",
				who, kind_names[f->kind]);
	if (f->ppm > 1000000u)
		return pwb__err(-EINVAL, "%s: ppm %u is above 1000000", who,
				f->ppm);
	if (f->dev_end && f->dev_start >= f->dev_end)
		return pwb__err(-EINVAL, "%s: device range [%llu, %llu) is "
					 "empty",
				who, (unsigned long long)f->dev_start,
				(unsigned long long)f->dev_end);
	return 0;
}

int pwb__bdi_inject_fault(struct pwb_bdi *bdi, const struct pwb_fault *fault)
{
	struct pwb__fault_state *fs = NULL, *old;
	int ret;

	pwb__err_clear();
	if (!bdi)
		return pwb__err(-EINVAL, "pwb_bdi_inject_fault: NULL bdi");
	if (fault) {
		ret = fault_validate(fault, "pwb_bdi_inject_fault");
		if (ret)
			return ret;
	}
	if (fault && fault->kind != PWB_FAULT_NONE) {
		fs = calloc(1, sizeof(*fs));
		if (!fs)
			return pwb__err(-ENOMEM, "pwb_bdi_inject_fault: out of "
						 "memory");
		fs->rule = *fault;
		if (!fs->rule.dev_end)
			fs->rule.dev_end = UINT64_MAX;
	}
	/* The read-side section keeps the bdi alive against a close. */
	if (pwb__bdi_enter(bdi, PWB__HOLD_RCU, "pwb_bdi_inject_fault")) {
		free(fs);
		return -ESHUTDOWN;
	}
	/* The swap orders the new state's initialisation before its
	 * publication (the exchange is a release). */
	old = __atomic_exchange_n(&bdi->fault, fs, __ATOMIC_ACQ_REL);
	if (old) {
		PWB__TSAN_RELEASE(old);
		pwb__call_rcu(&old->rcu, fault_free_rcu);
	}
	pwb__bdi_exit(bdi, PWB__HOLD_RCU);
	return 0;
}

/* pwb_bdi_fault_hits() under both its names. */
static int fault_hits(const struct pwb_bdi *bdi, uint64_t *hits)
{
	pwb__err_clear();
	if (!bdi || !hits)
		return pwb__err(-EINVAL, "pwb_bdi_fault_hits: NULL %s",
				!bdi ? "bdi" : "hits");
	if (pwb__bdi_enter((struct pwb_bdi *)bdi, PWB__HOLD_RCU,
			   "pwb_bdi_fault_hits"))
		return -ESHUTDOWN;
	*hits = pwb__aread(&bdi->fault_hits);
	pwb__bdi_exit((struct pwb_bdi *)bdi, PWB__HOLD_RCU);
	return 0;
}

PWB_API int pwb_bdi_fault_hits(const struct pwb_bdi *bdi, uint64_t *hits)
{
	return fault_hits(bdi, hits);
}

PWB_API int pwb_fault_hits(const struct pwb_bdi *bdi, uint64_t *hits)
{
	return fault_hits(bdi, hits);
}

/* ---------------------------------------------------------------------- */
/* The PWB_FAULT string: "kind[:key=value,...]"                          */

enum fault_key {
	KEY_NTH,
	KEY_EVERY,
	KEY_PPM,
	KEY_SEED,
	KEY_START,
	KEY_END,
	KEY_DELAY_MS,
	KEY_MAX_HITS,
	NR_KEYS,
};

static const struct {
	const char *name;
	bool size;		/* takes a K/M/G suffix */
	uint64_t max;
} keys[NR_KEYS] = {
	[KEY_NTH] = { "nth", false, UINT64_MAX },
	[KEY_EVERY] = { "every", false, UINT64_MAX },
	[KEY_PPM] = { "ppm", false, 1000000u },
	[KEY_SEED] = { "seed", false, UINT64_MAX },
	[KEY_START] = { "start", true, UINT64_MAX },
	[KEY_END] = { "end", true, UINT64_MAX },
	[KEY_DELAY_MS] = { "delay_ms", false, UINT32_MAX },
	[KEY_MAX_HITS] = { "max_hits", false, UINT64_MAX },
};

/*
 * Parse the @len characters at @s as an unsigned number: decimal, or hex
 * after "0x"; with @size, one K, M or G suffix (binary: 2^10, 2^20, 2^30).
 * No sign, no spaces, nothing left over, no overflow.
 */
static int parse_number(const char *s, size_t len, bool size, uint64_t *out)
{
	unsigned int base = 10, shift = 0;
	uint64_t v = 0;
	size_t i = 0;

	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		i = 2;
	}
	if (size && len > i) {
		const char *sfx = strchr("kKmMgG", s[len - 1]);

		if (sfx && *sfx) {
			shift = 10 * (unsigned int)(1 + (sfx - "kKmMgG") / 2);
			len--;
		}
	}
	if (i == len)
		return -EINVAL;
	for (; i < len; i++) {
		unsigned int d;

		if (isdigit((unsigned char)s[i]))
			d = (unsigned int)(s[i] - '0');
		else if (base == 16 && isxdigit((unsigned char)s[i]))
			d = (unsigned int)(tolower((unsigned char)s[i]) - 'a' +
					   10);
		else
			return -EINVAL;
		if (v > (UINT64_MAX - d) / base)
			return -ERANGE;
		v = v * base + d;
	}
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = v << shift;
	return 0;
}

/* Store @v in the field of @k; the caller checked it against keys[k].max. */
static void set_key(struct pwb_fault *f, enum fault_key k, uint64_t v)
{
	switch (k) {
	case KEY_NTH:
		f->nth = v;
		break;
	case KEY_EVERY:
		f->every = v;
		break;
	case KEY_PPM:
		f->ppm = (uint32_t)v;
		break;
	case KEY_SEED:
		f->seed = v;
		break;
	case KEY_START:
		f->dev_start = v;
		break;
	case KEY_END:
		f->dev_end = v;
		break;
	case KEY_DELAY_MS:
		f->delay_ms = (unsigned int)v;
		break;
	case KEY_MAX_HITS:
		f->max_hits = v;
		break;
	default:
		break;
	}
}

int pwb__fault_parse(const char *spec, struct pwb_fault *fault)
{
	static const char who[] = "pwb_fault_parse";
	unsigned int seen = 0;
	struct pwb_fault f;
	const char *p, *colon;
	size_t klen;
	unsigned int i;
	int ret;

	pwb__err_clear();
	if (!spec || !fault)
		return pwb__err(-EINVAL, "%s: NULL %s", who,
				!spec ? "spec" : "fault");
	memset(&f, 0, sizeof(f));
	colon = strchr(spec, ':');
	klen = colon ? (size_t)(colon - spec) : strlen(spec);
	for (i = 0; i < NR_KINDS; i++)
		if (strlen(kind_names[i]) == klen &&
		    !strncasecmp(spec, kind_names[i], klen))
			break;
	if (i == NR_KINDS) {
		/* The kinds named from the table, so the list cannot drift. */
		char kinds[128];
		size_t n = 0;

		for (i = 0; i < NR_KINDS && n < sizeof(kinds); i++)
			n += (size_t)snprintf(kinds + n, sizeof(kinds) - n,
					      "%s%s", i ? ", " : "",
					      kind_names[i]);
		return pwb__err(-EINVAL, "%s: \"%.*s\" is not a fault kind "
					 "(%s)", who, (int)klen, spec, kinds);
	}
	f.kind = (enum pwb_fault_kind)i;

	for (p = colon; p; ) {
		const char *item = p + 1, *eq, *end;
		enum fault_key k;
		uint64_t v;

		end = strchr(item, ',');
		if (!end)
			end = item + strlen(item);
		eq = memchr(item, '=', (size_t)(end - item));
		if (end == item)
			return pwb__err(-EINVAL, "%s: empty key=value at "
						 "offset %zu of \"%s\"",
					who, (size_t)(item - spec), spec);
		if (!eq)
			return pwb__err(-EINVAL, "%s: \"%.*s\" is not "
						 "key=value",
					who, (int)(end - item), item);
		for (k = 0; k < NR_KEYS; k++)
			if (strlen(keys[k].name) == (size_t)(eq - item) &&
			    !strncasecmp(item, keys[k].name,
					 (size_t)(eq - item)))
				break;
		if (k == NR_KEYS)
			return pwb__err(-EINVAL, "%s: unknown key \"%.*s\" "
						 "(nth, every, ppm, seed, "
						 "start, end, delay_ms, "
						 "max_hits)",
					who, (int)(eq - item), item);
		if (seen & (1u << k))
			return pwb__err(-EINVAL, "%s: key \"%s\" given twice",
					who, keys[k].name);
		seen |= 1u << k;
		ret = parse_number(eq + 1, (size_t)(end - eq - 1),
				   keys[k].size, &v);
		if (!ret && v > keys[k].max)
			ret = -ERANGE;
		if (ret)
			return pwb__err(-EINVAL, "%s: %s value \"%.*s\" is %s",
					who, keys[k].name,
					(int)(end - eq - 1), eq + 1,
					ret == -ERANGE ? "too large" :
					keys[k].size ?
					"not a number (K, M or G suffix "
					"allowed)" :
					"not an unsigned number");
		set_key(&f, k, v);
		p = *end ? end : NULL;
	}
	ret = fault_validate(&f, who);
	if (ret)
		return ret;
	*fault = f;
	return 0;
}
