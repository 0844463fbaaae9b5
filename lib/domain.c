// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * domain.c - memory domains: one dirty budget for several bdis
 *
 * The kernel holds every disk of a machine to one pair of dirty limits
 * (vm.dirty_bytes, vm.dirty_background_bytes) and gives each disk a share
 * of them that follows its share of the writeback recently completed
 * (mm/page-writeback.c's wb_domain and its flexible proportions). A fast
 * disk, which completes most of the writes, gets most of the memory; a
 * USB stick gets little, so its dirty pages, which take minutes to write,
 * cannot fill the memory the fast disks' writers need.
 *
 * Here the same for the bdis of one process:
 *
 *   share(b) = min(b) + events(b) / sum of events * (1 - sum of min)
 *
 * capped at max(b), in parts per million. events(b) counts the pages of
 * b whose writes completed; at the end of every period (period_ms of the
 * domain's clock) every count is halved, so a count is a sum of the
 * writes of past periods weighted 1, 1/2, 1/4, ...: a bdi that slows down
 * loses its share within a few periods. Halving all counts at once keeps
 * their proportions, so the shares change only when pages are written:
 * they are recomputed at completions, at most every period / 16 (and when
 * a bdi joins or leaves), and each member's thresholds, its share of the
 * domain's limits in its own pages, are stored where the throttle and
 * the flushers of a bdi without a domain read theirs (bdi->bg_thresh_pages,
 * bdi->dirty_limit_pages). The dirtying path thus costs what it costs
 * without a domain; only a writer above its share's set point looks at
 * the whole domain (pwb__domain_throttle()): there a bdi may borrow
 * beyond its share an eighth of the domain's free room, but never more
 * than one writeback chunk of its own (half a second of what it completed
 * lately, at least 4 MiB), unless it is held strictly
 * (PWB_BDI_STRICT_SHARE); and every writer waits while the domain as a
 * whole is at its limit.
 *
 * A share is earned by completed writes, as in the kernel: a bdi that
 * has completed none since it joined (or since its count decayed to
 * nothing) has its floor, min_share_ppm, and what it may borrow. An even
 * split until the first completions would hand a USB stick a third of a
 * three-device domain: its writer dirties that at memory speed before
 * anything is known about the device, and the stick then takes many
 * seconds to write it while the fast devices' writers wait for room. A
 * member's first completion recomputes the shares at once, so a fast
 * device earns its share within a write or two.
 *
 * domain.c sits below the throttle and the flushers: they ask it for the
 * shares and for the domain's state (which it reads from the members'
 * counters, bdi-state.c), and start writeback and pause writers on its
 * answers themselves.
 */
#include "base.h"
#include "wb_ctx.h"
#include "bdi.h"
#include "throttle.h"
#include "domain.h"
#include "writeback.h"

#include <string.h>
#include <urcu/rculist.h>

#define DEFAULT_PERIOD_MS 3000u
#define MIN_PERIOD_MS 10u
#define MAX_PERIOD_MS 3600000u
/* The least cache_bytes of a domain: 16 pages of 64 KiB (a member's page
 * size is checked against it when it joins). */
#define MIN_CACHE_BYTES (1ull << 20)

static uint64_t ppm_of(uint64_t v, uint64_t ppm)
{
	return (uint64_t)((unsigned __int128)v * ppm / PWB__PPM);
}

/* @bytes of a threshold in @bdi's pages: 0 stays "none", a positive
 * threshold is at least one page. */
static uint64_t to_pages(const struct pwb_bdi *bdi, uint64_t bytes)
{
	uint64_t pages = bytes >> bdi->page_shift;

	return bytes && !pages ? 1 : pages;
}

/* ---------------------------------------------------------------------- */
/* Shares                                                                 */

/* Halve @m's count @shift times, without losing a completion that adds
 * to it meanwhile. */
static void age_events(struct pwb__dom_member *m, unsigned int shift)
{
	uint64_t cur = pwb__aread(&m->events), prev;

	for (;;) {
		uint64_t aged = shift >= 64 ? 0 : cur >> shift;

		prev = uatomic_cmpxchg(&m->events, cur, aged);
		if (prev == cur)
			return;
		cur = prev;
	}
}

/* @share of the domain's threshold @bytes in @bdi's pages: 0 (none) if
 * the domain has none, else at least a page, even for a share of 0 (0
 * would mean "no limit"). */
static uint64_t share_pages(const struct pwb_bdi *bdi, uint64_t bytes,
			    uint64_t share)
{
	if (!bytes)
		return 0;
	return PWB__MAX(ppm_of(bytes, share) >> bdi->page_shift, 1ull);
}

/* Store @m's share and the thresholds it gives its bdi. */
static void set_share_locked(struct pwb_domain *dom, struct pwb__dom_member *m,
			     uint64_t share)
{
	struct pwb_bdi *bdi = m->bdi;

	uint64_t bg = share_pages(bdi, dom->cfg.dirty_background_bytes, share);
	uint64_t cap = pwb__aread(&bdi->bg_cap_pages);

	pwb__aset(&m->share_ppm, share);
	pwb__aset(&bdi->dirty_limit_pages,
		  share_pages(bdi, dom->cfg.dirty_bytes, share));
	/* Not above half the bdi's page cache, as without a domain
	 * (pcache-owner.c): the cache would fill with dirty pages before
	 * background writeback began. A cap set just after it was read
	 * here holds from the next recompute on. */
	pwb__aset(&bdi->bg_thresh_pages, cap && bg > cap ? cap : bg);
}

/* Every published member's share from the counts: with no count at all
 * (nothing written yet, or long ago), every member at its floor. Caller
 * holds dom->lock. */
static void recompute_locked(struct pwb_domain *dom)
{
	uint64_t total = 0, free_ppm = PWB__PPM - dom->sum_min_ppm;
	struct pwb__dom_member *m;

	cds_list_for_each_entry(m, &dom->members, node)
		total += pwb__aread(&m->events);
	cds_list_for_each_entry(m, &dom->members, node) {
		uint64_t raw = total ? (uint64_t)((unsigned __int128)
						  pwb__aread(&m->events) *
						  PWB__PPM / total)
				     : 0;
		uint64_t share = m->min_ppm + raw * free_ppm / PWB__PPM;

		set_share_locked(dom, m, PWB__MIN(share, (uint64_t)m->max_ppm));
	}
}

/* Age the counts by the periods that ended before @now. Caller holds
 * dom->lock. */
static void age_locked(struct pwb_domain *dom, uint64_t now)
{
	struct pwb__dom_member *m;
	uint64_t n;

	if (now < dom->period_start + dom->period_ns)
		return;
	n = (now - dom->period_start) / dom->period_ns;
	dom->period_start += n * dom->period_ns;
	dom->periods += n;
	cds_list_for_each_entry(m, &dom->members, node)
		age_events(m, (unsigned int)PWB__MIN(n, 64ull));
}

static void update_locked(struct pwb_domain *dom, uint64_t now)
{
	age_locked(dom, now);
	recompute_locked(dom);
	pwb__aset(&dom->next_update, now + dom->update_ns);
}

void pwb__domain_update(struct pwb_domain *dom, uint64_t now, bool force)
{
	if (force) {
		pthread_mutex_lock(&dom->lock);
	} else {
		if (now < pwb__aread(&dom->next_update))
			return;
		/* One updater at a time; the others have nothing to add. */
		if (pthread_mutex_trylock(&dom->lock))
			return;
		if (now < pwb__aread(&dom->next_update)) {
			pthread_mutex_unlock(&dom->lock);
			return;
		}
	}
	update_locked(dom, now);
	pthread_mutex_unlock(&dom->lock);
}

void pwb__domain_written(struct pwb_bdi *bdi, uint64_t pages)
{
	struct pwb__dom_member *m = bdi->dom;
	struct pwb_domain *dom = m->dom;
	uint64_t now = pwb__domain_now(dom);

	/*
	 * The first pages counted (since the count decayed to nothing):
	 * the bdi is at its floor until the shares are recomputed, so do
	 * it now, not at the next update due. Tried, never waited for, as
	 * every completion's update (base.h); if the lock is busy, the
	 * next update due (a sixteenth of a period later) counts them.
	 */
	if (uatomic_add_return(&m->events, pages) == pages) {
		if (!pthread_mutex_trylock(&dom->lock)) {
			update_locked(dom, now);
			pthread_mutex_unlock(&dom->lock);
		}
		return;
	}
	pwb__domain_update(dom, now, false);
}

/* ---------------------------------------------------------------------- */
/* The domain as a whole                                                  */

/*
 * Bytes dirty (not yet being written) and dirty + writeback over every
 * member: a walk of the members' contexts, lock-free. The members may
 * have different page sizes, hence bytes.
 */
static void domain_dirty(struct pwb_domain *dom, uint64_t *dirty,
			 uint64_t *total)
{
	struct pwb__dom_member *m;

	*dirty = *total = 0;
	rcu_read_lock();
	cds_list_for_each_entry_rcu(m, &dom->members, node) {
		struct pwb_bdi *bdi = m->bdi;

		*dirty += pwb__bdi_dirty_pages_rcu(bdi) << bdi->page_shift;
		*total += pwb__bdi_held_pages_rcu(bdi) << bdi->page_shift;
	}
	pwb__rcu_read_unlock();
}

bool pwb__domain_over_bg(struct pwb_bdi *bdi)
{
	struct pwb_domain *dom = bdi->dom->dom;
	uint64_t dirty, total;

	if (!dom->cfg.dirty_background_bytes)
		return false;
	domain_dirty(dom, &dirty, &total);
	return dirty > dom->cfg.dirty_background_bytes;
}

/*
 * One writeback chunk of @m's bdi in pages, from what it completed
 * lately: half a second at the rate its decaying count implies, rounded
 * up to the next multiple of PWB__MIN_WRITEBACK_BYTES, as a context's
 * chunk is (writeback.c). The count holds between one and two periods'
 * worth of completions (the halving at each period's end), so count /
 * (2 x period) is at most the rate. Not the contexts' bandwidth
 * estimate: until measured, that is a guess of 100 MiB/s, and a USB
 * stick would borrow for seconds on it. A bdi that has completed nothing
 * gets the least chunk.
 */
static uint64_t loan_pages(const struct pwb__dom_member *m)
{
	uint64_t min = PWB__MIN_WRITEBACK_BYTES >> m->bdi->page_shift;
	uint64_t half_s = (uint64_t)((unsigned __int128)pwb__aread(&m->events) *
				     PWB__NSEC_PER_SEC /
				     (4 * m->dom->period_ns));

	return half_s / min * min + min;
}

unsigned int pwb__domain_throttle(struct pwb_bdi *bdi,
				  struct pwb__throttle_state *s)
{
	struct pwb__dom_member *m = bdi->dom;
	struct pwb_domain *dom = m->dom;
	uint64_t limit = dom->cfg.dirty_bytes;
	uint64_t bg = dom->cfg.dirty_background_bytes;
	uint64_t dirty, total;
	unsigned int what = 0;

	if (!limit)
		return 0;
	/* Under its own share's set point a writer runs, whatever the
	 * others do: the common case, decided without the walk. (The
	 * limit below is only ever raised, which raises the set point.) */
	if (s->dirty <= pwb__throttle_setpoint(s->bg, s->limit))
		return 0;
	domain_dirty(dom, &dirty, &total);
	if (bg && dirty > bg)
		what |= PWB__DOMAIN_KICK;
	/*
	 * A bdi not held strictly may borrow: its limit is at least an
	 * eighth of the room the domain has left (never past its bound),
	 * so a bdi whose share is still small (it just began to write) is
	 * not stopped while the others leave room. Only an eighth: a slow
	 * bdi that took all the room it found whenever the fast ones
	 * drained for a moment would keep it for as long as it needs to
	 * write it, and the fast ones would then wait for the slow one (a
	 * free run of everyone under the domain's set point, the kernel's
	 * rule, lets it ratchet up so). And never more than one writeback
	 * chunk of its own: a loan its flushers pay back in about half a
	 * second, however slow the device, so a slow bdi holds at most its
	 * share and one chunk.
	 */
	if (!m->strict && total < limit) {
		uint64_t room = to_pages(bdi, (limit - total) / 8);

		room = PWB__MIN(room, loan_pages(m));
		room = PWB__MIN(room, m->max_limit_pages);
		s->limit = PWB__MAX(s->limit, room);
		if (s->dirty <= pwb__throttle_setpoint(s->bg, s->limit))
			return what;
	}
	/* The domain is full: pause as at the limit until there is room. */
	if (total >= limit && s->dirty < s->limit)
		s->dirty = s->limit;
	return what | PWB__DOMAIN_PAUSE;
}

/* ---------------------------------------------------------------------- */
/* Joining and leaving                                                    */

int pwb__domain_attach(struct pwb_bdi *bdi, const struct pwb_bdi_config *cfg)
{
	struct pwb_domain *dom = cfg->domain;
	unsigned int max = cfg->max_share_ppm ? cfg->max_share_ppm : PWB__PPM;
	struct pwb__dom_member *m;

	if (!dom) {
		if (cfg->min_share_ppm || cfg->max_share_ppm ||
		    (cfg->flags & PWB_BDI_STRICT_SHARE))
			return pwb__err(-EINVAL, "min_share_ppm, max_share_ppm "
						 "and PWB_BDI_STRICT_SHARE "
						 "need a domain");
		return 0;
	}
	if (max > PWB__PPM || cfg->min_share_ppm > max)
		return pwb__err(-EINVAL, "share bounds %u..%u ppm are not "
					 "within 0..1000000 in that order",
				cfg->min_share_ppm, cfg->max_share_ppm);
	if (dom->cfg.cache_bytes) {
		uint64_t budget = dom->cfg.cache_bytes;

		if (cfg->cache_bytes > budget)
			return pwb__err(-EINVAL, "cache_bytes %llu is above "
						 "the domain's cache_bytes %llu",
					(unsigned long long)cfg->cache_bytes,
					(unsigned long long)budget);
		if (budget >> bdi->page_shift < 16)
			return pwb__err(-EINVAL, "the domain's cache_bytes "
						 "%llu holds fewer than 16 "
						 "pages of %u bytes",
					(unsigned long long)budget,
					pwb__page_size(bdi));
	}
	m = calloc(1, sizeof(*m));
	if (!m)
		return pwb__err(-ENOMEM, "out of memory");
	m->dom = dom;
	m->bdi = bdi;
	m->strict = (cfg->flags & PWB_BDI_STRICT_SHARE) != 0;
	m->min_ppm = cfg->min_share_ppm;
	m->max_ppm = max;
	m->max_limit_pages = share_pages(bdi, dom->cfg.dirty_bytes, max);
	pthread_mutex_lock(&dom->lock);
	if (dom->sum_min_ppm + m->min_ppm > PWB__PPM) {
		unsigned int sum = dom->sum_min_ppm;

		pthread_mutex_unlock(&dom->lock);
		free(m);
		return pwb__err(-EINVAL, "min_share_ppm %u: the domain's "
					 "bdis already keep %u ppm of it",
				cfg->min_share_ppm, sum);
	}
	dom->sum_min_ppm += m->min_ppm;
	dom->nr_joined++;
	/* Until it completes writes: its floor (see the top). */
	set_share_locked(dom, m, m->min_ppm);
	pthread_mutex_unlock(&dom->lock);
	bdi->dom = m;
	return 0;
}

/*
 * The member list's two changes, made under dom->lock while readers walk
 * the list under RCU (cds_list_for_each_entry_rcu, which loads each next
 * pointer atomically). liburcu's cds_list_add_tail_rcu()/cds_list_del_rcu()
 * store the next pointer a reader follows through a volatile access,
 * which ThreadSanitizer does not take for an atomic one; these store it
 * with __atomic, release when it publishes a new member.
 */
static void member_list_add_tail(struct cds_list_head *newp,
				 struct cds_list_head *head)
{
	newp->next = head;
	newp->prev = head->prev;
	__atomic_store_n(&head->prev->next, newp, __ATOMIC_RELEASE);
	head->prev = newp;
}

static void member_list_del(struct cds_list_head *elem)
{
	elem->next->prev = elem->prev;
	pwb__aset(&elem->prev->next, elem->next);
}

void pwb__domain_publish(struct pwb_bdi *bdi)
{
	struct pwb__dom_member *m = bdi->dom;
	struct pwb_domain *dom;

	if (!m)
		return;
	dom = m->dom;
	pthread_mutex_lock(&dom->lock);
	member_list_add_tail(&m->node, &dom->members);
	m->published = true;
	dom->nr_members++;
	recompute_locked(dom);
	pthread_mutex_unlock(&dom->lock);
}

void pwb__domain_leave(struct pwb_bdi *bdi)
{
	struct pwb__dom_member *m = bdi->dom;
	struct pwb_domain *dom;

	if (!m)
		return;
	dom = m->dom;
	pthread_mutex_lock(&dom->lock);
	if (m->published) {
		member_list_del(&m->node);
		m->published = false;
		dom->nr_members--;
		recompute_locked(dom);
	}
	dom->sum_min_ppm -= m->min_ppm;
	dom->nr_joined--;
	pthread_mutex_unlock(&dom->lock);
}

void pwb__domain_member_free(struct pwb_bdi *bdi)
{
	free(bdi->dom);
	bdi->dom = NULL;
}

/* ---------------------------------------------------------------------- */
/* The public entry points                                                */

void pwb__domain_config_defaults(struct pwb_domain_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->dirty_bytes = 256ull << 20;
	cfg->dirty_background_bytes = 64ull << 20;
}

int pwb__domain_create(const struct pwb_domain_config *cfg,
		       struct pwb_domain **domp)
{
	struct pwb_domain_config defaults;
	struct pwb_domain *dom;
	unsigned int period;

	pwb__err_clear();
	if (!domp)
		return pwb__err(-EINVAL, "pwb_domain_create: NULL domp");
	if (!cfg) {
		pwb__domain_config_defaults(&defaults);
		cfg = &defaults;
	}
	if (cfg->dirty_bytes && cfg->dirty_bytes < cfg->dirty_background_bytes)
		return pwb__err(-EINVAL, "dirty_bytes %llu is below "
					 "dirty_background_bytes %llu",
				(unsigned long long)cfg->dirty_bytes,
				(unsigned long long)
					cfg->dirty_background_bytes);
	period = cfg->period_ms ? cfg->period_ms : DEFAULT_PERIOD_MS;
	if (period < MIN_PERIOD_MS || period > MAX_PERIOD_MS)
		return pwb__err(-EINVAL, "period_ms %u is outside %u..%u",
				period, MIN_PERIOD_MS, MAX_PERIOD_MS);
	if (cfg->cache_bytes && cfg->cache_bytes < MIN_CACHE_BYTES)
		return pwb__err(-EINVAL, "cache_bytes %llu is below 1 MiB, "
					 "the least a domain's page cache "
					 "holds (0: no domain budget)",
				(unsigned long long)cfg->cache_bytes);
	dom = calloc(1, sizeof(*dom));
	if (!dom)
		return pwb__err(-ENOMEM, "out of memory");
	dom->cfg = *cfg;
	/* As for one bdi's cache (pcache-owner.c): background writeback
	 * starts at half the budget at the latest, or the cache would fill
	 * with dirty pages before it began. */
	if (cfg->cache_bytes &&
	    dom->cfg.dirty_background_bytes > cfg->cache_bytes / 2)
		dom->cfg.dirty_background_bytes = cfg->cache_bytes / 2;
	if (!dom->cfg.clock)
		dom->cfg.clock = pwb__clock_monotonic;
	dom->period_ns = period * PWB__NSEC_PER_MSEC;
	dom->update_ns = dom->period_ns / 16;
	pwb__mutex_init(&dom->lock, PWB__LOCK_DOMAIN);
	CDS_INIT_LIST_HEAD(&dom->members);
	dom->period_start = pwb__domain_now(dom);
	dom->next_update = dom->period_start;
	*domp = dom;
	return 0;
}

PWB_API int pwb_domain_destroy(struct pwb_domain *dom)
{
	unsigned int joined;

	pwb__err_clear();
	if (!dom)
		return 0;
	pthread_mutex_lock(&dom->lock);
	joined = dom->nr_joined;
	pthread_mutex_unlock(&dom->lock);
	if (joined)
		return pwb__err(-EBUSY, "pwb_domain_destroy: %u bdi%s still "
					"in the domain",
				joined, joined == 1 ? " is" : "s are");
	/* Its tenants outlive it, detached; flushers walking their list
	 * (tenant.c) are done after the grace period. */
	pwb__tenant_scope_release(&dom->tn);
	pwb__synchronize_rcu();
	pthread_mutex_destroy(&dom->lock);
	free(dom);
	return 0;
}
