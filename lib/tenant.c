// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * tenant.c - tenants: the kernel's cgroup writeback in user space
 *
 * The kernel gives each cgroup its own bdi_writeback on every disk, so a
 * cgroup's dirty pages count against that cgroup's budget only, and the
 * I/O controller shares a saturated disk among cgroups by io.weight. Here
 * a tenant (struct pwb_tenant) groups inodes the same way, without a
 * writeback context of its own:
 *
 *  - Pages. Every change of an inode's DIRTY and WRITEBACK tags is
 *    counted on its tenant too, under the inode's lock (the same lock
 *    pwb_inode_set_tenant() moves the counts under), in bytes: held is
 *    dirty + writeback, the quantity a bdi's throttle uses.
 *
 *  - Throttling. A writer of an inode with a tenant is paused by the
 *    tenant's held bytes against the tenant's limits, never by the bdi's
 *    sum: its limit is its weight's share of the bdi's (or the domain's)
 *    dirty_bytes among the tenants holding pages now, or its own
 *    dirty_bytes if lower; the background threshold likewise, and half
 *    its own limit at most. A tenant alone takes the whole budget (an
 *    idle tenant holds nothing and weighs nothing); a flooding tenant
 *    fills only its share, and the writers of a light tenant under its
 *    set point run free. The pause itself is throttle.c's, from the
 *    tenant's state, its dirtier count and its share of the bandwidth.
 *
 *  - Writeback order. While tenants share a bdi, each SYNC_NONE round of
 *    a flusher over b_io serves by virtual time: a tenant's virtual time
 *    grows by bytes sent / weight (untenanted inodes share one, weight
 *    100, per bdi), the round starts from the lowest virtual time among
 *    the owners of b_io's inodes, and an inode whose owner is ahead of
 *    it waits on b_more_io for a later round. The lowest owner is always
 *    served, so a round always writes; an owner without dirty inodes is
 *    not among b_io's, so its share goes to the others (work-conserving);
 *    a tenant coming back from idle is raised to the bdi's virtual clock
 *    (the highest round minimum), so it cannot claim the time it did not
 *    use. Visits write at most PWB__TENANT_VISIT_BYTES, the grain of the
 *    order.
 *
 *  - Rate cap. A tenant's token bucket (pacing.c) is charged for what its
 *    inodes send; in debt, the tenant's inodes are passed over until the
 *    debt is paid, while the other tenants' are written. A round that
 *    found only such inodes sleeps in short slices.
 *
 *	b_io:   [A1] [B1] [A2] [C1]      owners' vt: A 10, B 30, C 10
 *	round:   A1 -> written            min vt 10
 *	         B1 -> b_more_io          (30 > 10: ahead)
 *	         A2 -> written
 *	         C1 -> written
 *
 * Tenants live on their scope's list (the bdi's or the domain's, struct
 * pwb__tenant_scope), which the flushers walk for the background
 * threshold; tenant_lock guards the lists, RCU their walks.
 */
#include "base.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "throttle.h"
#include "domain.h"
#include "inode.h"
#include "tenant.h"

#include <string.h>

#define MAX_WEIGHT 10000u
/* Dirtiers are counted over windows of this length, as in throttle.c. */
#define DIRTIER_WINDOW_NS (200 * PWB__NSEC_PER_MSEC)

static pthread_mutex_t tenant_lock = PTHREAD_MUTEX_INITIALIZER;
PWB__MUTEX_RANK_STATIC(tenant_lock, PWB__LOCK_TENANT);

/* ---------------------------------------------------------------------- */
/* Page accounting                                                        */

/* Raise *@p to @v if it is below (lock-free). */
static void raise_to(uint64_t *p, uint64_t v)
{
	uint64_t cur = pwb__aread(p), prev;

	while (cur < v) {
		prev = uatomic_cmpxchg(p, cur, v);
		if (prev == cur)
			return;
		cur = prev;
	}
}

/* Add @delta to @t's held bytes; the first page held puts the tenant's
 * weight among its scope's active ones, the last page gone takes it out.
 * The add returns the new count, so each transition is seen once. */
static void held_add(struct pwb_tenant *t, int64_t delta)
{
	uint64_t now = uatomic_add_return(&t->held, (uint64_t)delta);
	uint64_t before = now - (uint64_t)delta;
	struct pwb__tenant_scope *sc;

	if (!delta)
		return;
	if (delta > 0 && now > pwb__aread(&t->max_held))
		raise_to(&t->max_held, now);
	if (!!before == !!now)
		return;
	sc = pwb__aread(&t->scope);
	if (!sc)
		return;
	if (now) {
		uatomic_add(&sc->active_weight, (int64_t)t->cfg.weight);
		/* Back from idle: the round raises it to the clock. */
		pwb__aset(&t->fresh, 1);
	} else {
		uatomic_sub(&sc->active_weight, (int64_t)t->cfg.weight);
	}
}

void pwb__tenant_dirtied(struct pwb_tenant *t, uint64_t bytes)
{
	held_add(t, (int64_t)bytes);
	uatomic_add(&t->dirtied, bytes);
}

void pwb__tenant_start_write(struct pwb_tenant *t, uint64_t bytes)
{
	uatomic_add(&t->writeback, bytes);
}

void pwb__tenant_end_write(struct pwb_tenant *t, uint64_t bytes,
			   uint64_t redirtied, bool ok)
{
	uatomic_sub(&t->writeback, bytes);
	held_add(t, (int64_t)redirtied - (int64_t)bytes);
	if (ok)
		uatomic_add(&t->written, bytes);
}

void pwb__tenant_dropped(struct pwb_tenant *t, uint64_t bytes)
{
	held_add(t, -(int64_t)bytes);
}

/* Move @inode's pages from @from to @to (either may be NULL). Caller
 * holds inode->lock. */
static void move_pages_locked(struct pwb_inode *inode, struct pwb_tenant *from,
			      struct pwb_tenant *to)
{
	unsigned int sh = inode->bdi->page_shift;
	uint64_t dirty = inode->map.count[PWB__TAG_DIRTY] << sh;
	uint64_t wbk = inode->map.count[PWB__TAG_WRITEBACK] << sh;

	pwb__lockdep_assert_held(&inode->lock);
	if (from) {
		uatomic_sub(&from->writeback, wbk);
		held_add(from, -(int64_t)(dirty + wbk));
	}
	if (to) {
		uatomic_add(&to->writeback, wbk);
		held_add(to, (int64_t)(dirty + wbk));
	}
}

void pwb__tenant_inode_closed(struct pwb_inode *inode)
{
	struct pwb_tenant *t;

	pthread_mutex_lock(&inode->lock);
	t = inode->tenant;
	if (t) {
		/* Its pages and its slices' left the tenant's count when
		 * pwb__inode_unlink() took them off the lists. */
		pwb__aset(&inode->tenant, NULL);
		uatomic_dec(&t->nr_inodes);
		uatomic_dec(&inode->bdi->tn.nr_inodes);
	}
	pthread_mutex_unlock(&inode->lock);
}

/* ---------------------------------------------------------------------- */
/* Throttling                                                             */

/* The limits @t's share is taken from, in bytes: its domain's, or those
 * of @bdi (in a domain, @bdi's share of it). */
static void scope_limits(const struct pwb_tenant *t, struct pwb_bdi *bdi,
			 uint64_t *limit, uint64_t *bg)
{
	if (t->domain) {
		*limit = t->domain->cfg.dirty_bytes;
		*bg = t->domain->cfg.dirty_background_bytes;
	} else {
		*limit = pwb__aread(&bdi->dirty_limit_pages) << bdi->page_shift;
		*bg = pwb__aread(&bdi->bg_thresh_pages) << bdi->page_shift;
	}
}

/* The weights @t's share is taken among: those of the tenants of its
 * scope holding pages, its own at least (it asks because it holds
 * pages, and a sum caught between two transitions may be low). */
static uint64_t active_weight(const struct pwb_tenant *t, int64_t a)
{
	return PWB__MAX((uint64_t)PWB__MAX(a, (int64_t)0),
			(uint64_t)t->cfg.weight);
}

/* @v * @w / @aw without overflow: 64-bit arithmetic below a PiB. */
static uint64_t scale(uint64_t v, uint64_t w, uint64_t aw)
{
	if (v < (1ull << 50))
		return v * w / aw;
	return (uint64_t)((unsigned __int128)v * w / aw);
}

/* @t's limit and background threshold in bytes: its weight's share of
 * the scope's (@slim, @sbg) among @aw, or its own limit if lower. 0: no
 * limit. */
static void tenant_limits(const struct pwb_tenant *t, uint64_t slim,
			  uint64_t sbg, uint64_t aw, uint64_t *limit,
			  uint64_t *bg)
{
	uint64_t w = t->cfg.weight;
	uint64_t lim = scale(slim, w, aw), b = scale(sbg, w, aw);

	if (t->cfg.dirty_bytes && (!lim || t->cfg.dirty_bytes < lim)) {
		lim = t->cfg.dirty_bytes;
		b = PWB__MIN(b, lim / 2);
	}
	*limit = lim;
	*bg = lim ? b : 0;
}

/* tenant_limits() from the current state of @t's scope. */
static void tenant_limits_now(struct pwb_tenant *t, struct pwb_bdi *bdi,
			      uint64_t *limit, uint64_t *bg)
{
	struct pwb__tenant_scope *sc = pwb__aread(&t->scope);
	uint64_t slim, sbg;

	scope_limits(t, bdi, &slim, &sbg);
	tenant_limits(t, slim, sbg,
		      active_weight(t, sc ? pwb__aread(&sc->active_weight)
					  : 0),
		      limit, bg);
}

/* The calling thread's last counted tenant and window (16 bytes of the
 * static TLS block: see PWB__TLS_FAST). */
static PWB__TLS_FAST const struct pwb_tenant *counted_tenant;
static PWB__TLS_FAST uint64_t counted_window;

/* Threads dirtying for @t now (at least 1): throttle.c's count, per
 * tenant, so another tenant's writers do not shrink this one's pace. */
static unsigned int tenant_dirtiers(struct pwb_tenant *t, uint64_t now)
{
	uint64_t window = now / DIRTIER_WINDOW_NS + 1;
	uint64_t seen = pwb__aread(&t->thr_window);
	uint64_t cur, prev;

	if (seen != window &&
	    uatomic_cmpxchg(&t->thr_window, seen, window) == seen) {
		prev = seen + 1 == window ? pwb__aread(&t->thr_cur) : 0;
		pwb__aset(&t->thr_prev, prev);
		pwb__aset(&t->thr_cur, 0);
	}
	if (counted_tenant != t || counted_window != window) {
		counted_tenant = t;
		counted_window = window;
		uatomic_inc(&t->thr_cur);
	}
	cur = pwb__aread(&t->thr_cur);
	prev = pwb__aread(&t->thr_prev);
	return (unsigned int)PWB__MAX(PWB__MAX(cur, prev), 1ull);
}

unsigned int pwb__tenant_throttle_state(struct pwb_tenant *t,
					struct pwb_bdi *bdi,
					struct pwb__throttle_state *s)
{
	unsigned int sh = bdi->page_shift, what = 0;
	uint64_t lim, bg, slim, sbg, aw, free_bytes;
	uint64_t held = pwb__aread(&t->held);
	struct pwb__tenant_scope *sc = pwb__aread(&t->scope);
	int64_t a = sc ? pwb__aread(&sc->active_weight) : 0;

	scope_limits(t, bdi, &slim, &sbg);
	/*
	 * The common case, decided from what the last call stored: the
	 * scope's limits and the active weights as they were then, and the
	 * bytes under which the tenant neither kicks writeback nor pauses.
	 * The three are stored one by one: a call racing with a change may
	 * decide once from a mix, as from any racing read of the counts.
	 */
	if (slim == pwb__aread(&t->c_slim) && sbg == pwb__aread(&t->c_sbg) &&
	    a == pwb__aread(&t->c_aw) && held <= pwb__aread(&t->c_free))
		return 0;
	aw = active_weight(t, a);
	tenant_limits(t, slim, sbg, aw, &lim, &bg);
	s->limit = PWB__MAX(lim >> sh, 1ull);
	s->bg = bg >> sh;
	free_bytes = !lim ? UINT64_MAX
			  : pwb__throttle_setpoint(s->bg, s->limit) << sh;
	if (bg)
		free_bytes = PWB__MIN(free_bytes, bg);
	pwb__aset(&t->c_free, free_bytes);
	pwb__aset(&t->c_slim, slim);
	pwb__aset(&t->c_sbg, sbg);
	pwb__aset(&t->c_aw, a);
	pwb__aset(&t->limit_bytes, lim);
	if (!lim)
		return 0;
	s->dirty = held >> sh;
	if (bg && held > bg)
		what |= PWB__TENANT_KICK;
	if (s->dirty <= pwb__throttle_setpoint(s->bg, s->limit))
		return what;
	if (!bg)
		what |= PWB__TENANT_KICK;	/* no threshold: start it here */
	/* Its share of the device, at most its rate cap. */
	s->bw = scale(s->bw, t->cfg.weight, aw);
	if (t->rate.rate)
		s->bw = PWB__MIN(s->bw, t->rate.rate);
	s->nr_dirtiers = tenant_dirtiers(t, pwb__now(bdi));
	return what | PWB__TENANT_PAUSE;
}

void pwb__tenant_throttled(struct pwb_tenant *t, uint64_t ns, uint64_t events)
{
	uatomic_add(&t->throttle_ns, ns);
	uatomic_add(&t->throttle_events, events);
}

static bool scope_over_bg_rcu(struct pwb__tenant_scope *sc,
			      struct pwb_bdi *bdi)
{
	struct pwb_tenant *t;

	for (t = PWB__RCU_DEREF(sc->first); t; t = PWB__RCU_DEREF(t->next)) {
		uint64_t lim, bg, held = pwb__aread(&t->held);

		if (!held)
			continue;
		tenant_limits_now(t, bdi, &lim, &bg);
		if (lim && held - pwb__aread(&t->writeback) > bg)
			return true;
	}
	return false;
}

bool pwb__tenant_over_bg(struct pwb_bdi *bdi)
{
	bool over;

	rcu_read_lock();
	over = scope_over_bg_rcu(&bdi->tn, bdi) ||
	       (bdi->dom && scope_over_bg_rcu(&bdi->dom->dom->tn, bdi));
	pwb__rcu_read_unlock();
	return over;
}

/* ---------------------------------------------------------------------- */
/* The flushers' order of service                                         */

static uint64_t *owner_vt(struct pwb_bdi *bdi, struct pwb_tenant *t)
{
	return t ? &t->vt : &bdi->tn.default_vt;
}

/* True while @t's rate cap is in debt at @now; *@wait gets how long. */
static bool rate_held(const struct pwb_tenant *t, uint64_t now,
		      uint64_t *wait)
{
	uint64_t until;

	if (!t || !t->rate.rate)
		return false;
	until = pwb__aread(&t->rate_until);
	if (until <= now)
		return false;
	*wait = until - now;
	return true;
}

static void note_wait(struct pwb__tenant_round *r, uint64_t wait)
{
	if (!r->rate_wait || wait < r->rate_wait)
		r->rate_wait = wait;
}

void pwb__tenant_round_start_locked(struct pwb__wb_ctx *wb,
				    struct pwb__tenant_round *r)
{
	struct pwb_bdi *bdi = wb->bdi;
	uint64_t clock = pwb__aread(&bdi->tn.vclock), now = pwb__now(bdi);
	uint64_t min = UINT64_MAX, wait;
	struct pwb_inode *inode;

	pwb__lockdep_assert_held(&wb->list_lock);
	r->rate_wait = 0;
	cds_list_for_each_entry(inode, &wb->b_io, io_list) {
		struct pwb_tenant *t = pwb__aread(&inode->tenant);
		uint64_t *vp = owner_vt(bdi, t);

		/* A tenant waiting for its rate cap is not served: the
		 * others must not wait for it. */
		if (rate_held(t, now, &wait)) {
			note_wait(r, wait);
			continue;
		}
		if (t && pwb__aread(&t->fresh) &&
		    uatomic_cmpxchg(&t->fresh, 1, 0) == 1)
			raise_to(vp, clock);
		min = PWB__MIN(min, pwb__aread(vp));
	}
	r->min_vt = min;
	if (min != UINT64_MAX)
		raise_to(&bdi->tn.vclock, min);
}

bool pwb__tenant_skip_locked(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			     struct pwb__tenant_round *r)
{
	struct pwb_bdi *bdi = wb->bdi;
	struct pwb_tenant *t = pwb__aread(&inode->tenant);
	uint64_t wait;

	pwb__lockdep_assert_held(&wb->list_lock);
	if (rate_held(t, pwb__now(bdi), &wait)) {
		note_wait(r, wait);
		return true;
	}
	return pwb__aread(owner_vt(bdi, t)) > r->min_vt;
}

bool pwb__tenant_charge(struct pwb__wb_ctx *wb, struct pwb_inode *inode,
			uint64_t bytes)
{
	struct pwb_bdi *bdi = wb->bdi;
	struct pwb_tenant *t = pwb__aread(&inode->tenant);
	uint64_t now, wait, until, prev;

	if (!t) {
		uatomic_add(&bdi->tn.default_vt,
			    (bytes >> 9) *
				    (PWB__TENANT_VT / PWB__TENANT_DEFAULT_WEIGHT));
		return false;
	}
	uatomic_add(&t->vt, (bytes >> 9) * t->vt_scale);
	if (!t->rate.rate)
		return false;
	now = pwb__now(bdi);
	wait = pwb__rate_charge(&t->rate, bytes, now);
	if (!wait)
		return false;
	/* The time held back: from now, or from where the last debt
	 * ended if it still runs. */
	until = now + wait;
	prev = pwb__aread(&t->rate_until);
	if (until > prev)
		uatomic_add(&t->rate_limited_ns,
			    until - PWB__MAX(prev, now));
	raise_to(&t->rate_until, until);
	return true;
}

/* ---------------------------------------------------------------------- */
/* Scopes                                                                 */

void pwb__tenant_scope_release(struct pwb__tenant_scope *sc)
{
	struct pwb_tenant *t, *next;

	pthread_mutex_lock(&tenant_lock);
	for (t = sc->first; t; t = next) {
		next = t->next;
		pwb__aset(&t->scope, NULL);
		t->next = NULL;
	}
	PWB__RCU_ASSIGN(sc->first, NULL);
	pthread_mutex_unlock(&tenant_lock);
	/* The caller frees the scope only after a grace period (bdi close,
	 * domain destroy wait for walks of it to end). */
}

/* ---------------------------------------------------------------------- */
/* The public entry points                                                */

void pwb__tenant_config_defaults(struct pwb_tenant_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->weight = PWB__TENANT_DEFAULT_WEIGHT;
}

int pwb__tenant_create(struct pwb_domain *domain, struct pwb_bdi *bdi,
		       const struct pwb_tenant_config *cfg,
		       struct pwb_tenant **out)
{
	struct pwb_tenant_config defaults;
	struct pwb__tenant_scope *sc;
	struct pwb_tenant *t;
	int ret;

	pwb__err_clear();
	if (!out)
		return pwb__err(-EINVAL, "pwb_tenant_create: NULL out");
	if (!domain == !bdi)
		return pwb__err(-EINVAL, "pwb_tenant_create: give exactly one "
					 "of domain and bdi");
	if (!cfg) {
		pwb__tenant_config_defaults(&defaults);
		cfg = &defaults;
	}
	if (cfg->weight < 1 || cfg->weight > MAX_WEIGHT)
		return pwb__err(-EINVAL, "pwb_tenant_create: weight %u is "
					 "outside 1..%u",
				cfg->weight, MAX_WEIGHT);
	t = calloc(1, sizeof(*t));
	if (!t)
		return pwb__err(-ENOMEM, "out of memory");
	t->cfg = *cfg;
	t->domain = domain;
	t->bdi = bdi;
	t->vt_scale = PWB__TENANT_VT / cfg->weight;
	if (bdi) {
		ret = pwb__bdi_enter(bdi, PWB__HOLD_REF, "pwb_tenant_create");
		if (ret) {
			free(t);
			return ret;
		}
		sc = &bdi->tn;
		t->vt = pwb__aread(&sc->vclock);
		pwb__rate_init(&t->rate, cfg->rate_limit_bytes_per_sec,
			       PWB__TENANT_CHUNK_BYTES, pwb__now(bdi));
	} else {
		sc = &domain->tn;
		pwb__rate_init(&t->rate, cfg->rate_limit_bytes_per_sec,
			       PWB__TENANT_CHUNK_BYTES,
			       pwb__domain_now(domain));
	}
	pthread_mutex_lock(&tenant_lock);
	t->scope = sc;
	t->next = sc->first;
	PWB__RCU_ASSIGN(sc->first, t);
	pthread_mutex_unlock(&tenant_lock);
	if (bdi)
		pwb__bdi_exit(bdi, PWB__HOLD_REF);
	*out = t;
	return 0;
}

PWB_API int pwb_tenant_destroy(struct pwb_tenant *t)
{
	struct pwb_tenant **pp;
	uint64_t n;

	pwb__err_clear();
	if (!t)
		return 0;
	n = pwb__aread(&t->nr_inodes);
	if (n)
		return pwb__err(-EBUSY, "pwb_tenant_destroy: %llu inode%s "
					"still attached",
				(unsigned long long)n, n == 1 ? "" : "s");
	pthread_mutex_lock(&tenant_lock);
	if (t->scope) {
		for (pp = &t->scope->first; *pp; pp = &(*pp)->next) {
			if (*pp == t) {
				PWB__RCU_ASSIGN(*pp, t->next);
				break;
			}
		}
	}
	pthread_mutex_unlock(&tenant_lock);
	/* Flushers may be walking the list through it. */
	pwb__synchronize_rcu();
	pwb__rate_destroy(&t->rate);
	free(t);
	return 0;
}

PWB_API int pwb_inode_set_tenant(struct pwb_inode *inode,
				 struct pwb_tenant *t)
{
	struct pwb_bdi *bdi;
	struct pwb_tenant *old;
	int ret;

	pwb__err_clear();
	if (!inode)
		return pwb__err(-EINVAL, "pwb_inode_set_tenant: NULL inode");
	ret = pwb__inode_enter(inode, PWB__HOLD_REF, "pwb_inode_set_tenant");
	if (ret)
		return ret;
	bdi = inode->bdi;
	if (t && (!pwb__aread(&t->scope) ||
		  (t->bdi ? t->bdi != bdi
			  : !bdi->dom || bdi->dom->dom != t->domain))) {
		pwb__inode_exit(inode, PWB__HOLD_REF);
		return pwb__err(-EINVAL, "pwb_inode_set_tenant: the tenant "
					 "belongs to another bdi or domain, "
					 "or its own is gone");
	}
	pthread_mutex_lock(&inode->lock);
	old = inode->tenant;
	if (old != t && PWB__RCU_DEREF(inode->region)) {
		pthread_mutex_unlock(&inode->lock);
		pwb__inode_exit(inode, PWB__HOLD_REF);
		return pwb__err(-EBUSY, "pwb_inode_set_tenant: a per-page "
					"policy routes the pages of inode "
					"%llu already",
				(unsigned long long)inode->ino);
	}
	if (old != t) {
		move_pages_locked(inode, old, t);
		pwb__aset(&inode->tenant, t);
		if (t)
			uatomic_inc(&t->nr_inodes);
		if (old)
			uatomic_dec(&old->nr_inodes);
		if (t && !old)
			uatomic_inc(&bdi->tn.nr_inodes);
		else if (!t && old)
			uatomic_dec(&bdi->tn.nr_inodes);
	}
	pthread_mutex_unlock(&inode->lock);
	pwb__inode_exit(inode, PWB__HOLD_REF);
	return 0;
}

int pwb__tenant_stats(struct pwb_tenant *t, struct pwb_tenant_stats *st)
{
	uint64_t held, wbk;
	unsigned int i;

	if (!t || !st)
		return pwb__err(-EINVAL, "pwb_tenant_stats: NULL %s",
				t ? "st" : "tenant");
	memset(st, 0, sizeof(*st));
	wbk = pwb__aread(&t->writeback);
	held = pwb__aread(&t->held);
	st->dirty_bytes = held > wbk ? held - wbk : 0;
	st->writeback_bytes = wbk;
	st->max_held_bytes = pwb__aread(&t->max_held);
	st->dirtied_bytes = pwb__aread(&t->dirtied);
	st->written_bytes = pwb__aread(&t->written);
	st->throttled_ns = pwb__aread(&t->throttle_ns);
	st->throttle_events = pwb__aread(&t->throttle_events);
	st->rate_limited_ns = pwb__aread(&t->rate_limited_ns);
	st->limit_bytes = pwb__aread(&t->limit_bytes);
	st->nr_inodes = pwb__aread(&t->nr_inodes);
	st->weight = t->cfg.weight;
	for (i = 0; i < PWB_BLOCK_SLOTS; i++) {
		st->blocked_ns[i] = pwb__aread(&t->blocked_ns[i]);
		st->blocked_events[i] = pwb__aread(&t->blocked_events[i]);
	}
	return 0;
}
