// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * pcache-pool.c - library-owned pages: their buffers. Buffers are carved
 * from chunks mapped and faulted in at once and pooled for reuse (struct
 * pwb__page_pool in pcache.h: a bdi's own, or its domain's, shared by the
 * members of one page size); the chunks of an ended pool are kept for the
 * next one. Also the RCU callbacks that free removed pages.
 */
#include "pcache.h"

#include <inttypes.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Map @len bytes (a multiple of 2 MiB) aligned to 2 MiB, asking for
 * transparent huge pages, and fault them in. One fault per 2 MiB instead
 * of one per 4 KiB page: in a paravirtualised guest each fault is an exit,
 * and they were most of a cold pwb_write(). Where THP is off (or the
 * madvise calls are unknown) the mapping is faulted in page by page, as
 * before. NULL: out of memory.
 */
static char *chunk_map(size_t len)
{
	size_t align = PWB__PCACHE_CHUNK_BYTES, head;
	char *raw, *c;

	raw = mmap(NULL, len + align, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (raw == MAP_FAILED)
		return NULL;
	head = (align - ((uintptr_t)raw & (align - 1))) & (align - 1);
	c = raw + head;
	if (head)
		munmap(raw, head);
	munmap(c + len, align - head);
#ifdef MADV_HUGEPAGE
	madvise(c, len, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
	if (madvise(c, len, MADV_POPULATE_WRITE) == 0)
		return c;
	if (errno == ENOMEM || errno == EFAULT || errno == EHWPOISON) {
		munmap(c, len);
		return NULL;
	}
#endif
	/* Older kernels: touch each page (a huge page takes one fault). */
	for (size_t off = 0; off < len; off += 4096)
		((volatile char *)c)[off] = 0;
	return c;
}

/*
 * Chunks a closed bdi gave back, kept for the next bdi of the process
 * instead of being unmapped: memory the process already touched is cheap
 * to reuse, while a fresh mapping is zeroed by the kernel (and, in a
 * virtual machine whose host takes back free memory, backed again by the
 * host: about 600 MB/s here, most of the cost of filling a new cache).
 * They are marked MADV_FREE, so the kernel may still take them under
 * memory pressure. At most retain_cap bytes are kept: an eighth of RAM,
 * up to 1 GiB.
 */
static pthread_mutex_t retain_lock = PTHREAD_MUTEX_INITIALIZER;
PWB__MUTEX_RANK_STATIC(retain_lock, PWB__LOCK_CHUNK_RETAIN);
static struct {
	void **v;			/* retain_lock: retained chunks */
	size_t nr, cap;			/* retain_lock */
} retained;

static size_t retain_cap(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz
					    : 0;

	return (size_t)PWB__MIN(ram / 8, 1ull << 30) / PWB__PCACHE_CHUNK_BYTES;
}

/* A retained chunk of the standard size, or NULL. */
static char *chunk_reuse(size_t len)
{
	char *c = NULL;

	if (len != PWB__PCACHE_CHUNK_BYTES)
		return NULL;
	pthread_mutex_lock(&retain_lock);
	if (retained.nr)
		c = retained.v[--retained.nr];
	pthread_mutex_unlock(&retain_lock);
	return c;
}

/* Give back a chunk of a closing bdi: keep it or unmap it. */
static void chunk_release(char *c, size_t len)
{
	bool kept = false;

	if (len == PWB__PCACHE_CHUNK_BYTES) {
		pthread_mutex_lock(&retain_lock);
		if (retained.nr == retained.cap &&
		    retained.cap < retain_cap()) {
			size_t cap = PWB__MIN(retained.cap ? 2 * retained.cap
							   : 64,
					      retain_cap());
			void **v = realloc(retained.v, cap * sizeof(*v));

			if (v) {
				retained.v = v;
				retained.cap = cap;
			}
		}
		if (retained.nr < retained.cap) {
			retained.v[retained.nr++] = c;
			kept = true;
		}
		pthread_mutex_unlock(&retain_lock);
	}
	if (!kept) {
		munmap(c, len);
		return;
	}
#ifdef MADV_FREE
	madvise(c, len, MADV_FREE);
#endif
}

/* The order of a whole chunk of @pool's pages, as a folio. */
static unsigned int chunk_order(const struct pwb__page_pool *pool, size_t ps)
{
	unsigned int k = 0;

	while (k + 1 < PWB__FOLIO_ORDERS && (ps << (k + 1)) <= pool->chunk_bytes)
		k++;
	return k;
}

/* Push @b, a free buffer of @order, on its list. */
static void put_locked(struct pwb__page_pool *pool, void *b,
		       unsigned int order)
{
	if (!order) {
		*(void **)b = pool->free;
		pool->free = b;
		pool->len++;
	} else {
		*(void **)b = pool->ffree[order];
		pool->ffree[order] = b;
	}
}

/*
 * A free buffer of @order (0: a page) from @pool: of that order, or the
 * first half of the smallest larger free folio, halved down to @order
 * (each second half goes to the list of its order, as in a buddy
 * allocator; halves are not merged again). A chunk's pages thus serve
 * single pages without breaking more than one folio of each order. NULL:
 * none.
 */
static void *take_locked(struct pwb__page_pool *pool, size_t ps,
			 unsigned int order)
{
	unsigned int k;
	char *b;

	if (!order && pool->free) {
		b = pool->free;
		pool->free = *(void **)b;
		pool->len--;
		return b;
	}
	for (k = order ? order : 1; k < PWB__FOLIO_ORDERS; k++)
		if (pool->ffree[k])
			break;
	if (k >= PWB__FOLIO_ORDERS)
		return NULL;
	b = pool->ffree[k];
	pool->ffree[k] = *(void **)b;
	while (k > order) {
		k--;
		put_locked(pool, b + (ps << k), k);
	}
	return b;
}

/*
 * Map one chunk of @pool and add it to the free lists as folios of the
 * chunk's order. With @bound (PWB_BDI_CACHE_PREFAULT), only while the pool
 * holds fewer than @bound chunks, and a retained chunk is faulted in again
 * too (the kernel may have taken its MADV_FREE pages). Returns with the
 * pool's lock held, or NULL and the lock not held: out of memory, or the
 * bound reached.
 */
static char *chunk_add(struct pwb__page_pool *pool, size_t ps, size_t bound)
{
	char *c = chunk_reuse(pool->chunk_bytes);
	unsigned int k = chunk_order(pool, ps);

#ifdef MADV_POPULATE_WRITE
	if (c && bound)
		madvise(c, pool->chunk_bytes, MADV_POPULATE_WRITE);
#endif
	if (!c)
		c = chunk_map(pool->chunk_bytes);
	if (!c)
		return NULL;
	pthread_mutex_lock(&pool->lock);
	if (bound && pool->nr_chunks >= bound)
		goto give_back;
	if (pool->nr_chunks == pool->cap_chunks) {
		size_t cap = pool->cap_chunks ? 2 * pool->cap_chunks : 16;
		void **v = realloc(pool->chunks, cap * sizeof(*v));

		if (!v)
			goto give_back;
		pool->chunks = v;
		pool->cap_chunks = cap;
	}
	pool->chunks[pool->nr_chunks++] = c;
	/* A chunk holding more than one folio of the largest order (pages
	 * so small) goes in as several. */
	for (size_t off = 0; off + (ps << k) <= pool->chunk_bytes;
	     off += ps << k)
		put_locked(pool, c + off, k);
	return c;
give_back:
	pthread_mutex_unlock(&pool->lock);
	chunk_release(c, pool->chunk_bytes);
	return NULL;
}

/* Map one chunk of @pool and take a buffer of @order from the free lists.
 * NULL: out of memory. */
static void *chunk_carve(struct pwb__page_pool *pool, size_t ps,
			 unsigned int order)
{
	void *b;

	if (!chunk_add(pool, ps, 0))
		return NULL;
	b = take_locked(pool, ps, order);
	pthread_mutex_unlock(&pool->lock);
	return b;
}

int pwb__page_pool_prefault(struct pwb__page_pool *pool, size_t ps,
			    uint64_t bytes)
{
	size_t want = (size_t)((bytes + pool->chunk_bytes - 1) /
			       pool->chunk_bytes);
	size_t have;

	while (chunk_add(pool, ps, want))
		pthread_mutex_unlock(&pool->lock);
	/* The bound reached (perhaps by another member of a domain first),
	 * or no memory. */
	pthread_mutex_lock(&pool->lock);
	have = pool->nr_chunks;
	pthread_mutex_unlock(&pool->lock);
	if (have < want)
		return pwb__err(-ENOMEM, "out of memory faulting in %" PRIu64
					 " bytes of page cache",
				bytes);
	return 0;
}

/* A page buffer: from the pool, else a new chunk. NULL: out of memory. */
void *pwb__pcache_buf_alloc(struct pwb_bdi *bdi)
{
	struct pwb__page_pool *pool = bdi->pcache->pool;
	size_t ps = pwb__page_size(bdi);
	void *b;

	pthread_mutex_lock(&pool->lock);
	b = take_locked(pool, ps, 0);
	pthread_mutex_unlock(&pool->lock);
	return b ? b : chunk_carve(pool, ps, 0);
}

void *pwb__pcache_folio_buf_alloc(struct pwb_bdi *bdi, unsigned int order)
{
	struct pwb__page_pool *pool = bdi->pcache->pool;
	size_t ps = pwb__page_size(bdi);
	bool fresh;
	void *b;

	if (!order || order > chunk_order(pool, ps))
		return NULL;
	pthread_mutex_lock(&pool->lock);
	b = take_locked(pool, ps, order);
	/* Memory in use stays near cache_bytes: a new chunk only when the
	 * free pages could not hold the folio anyway. */
	fresh = !b && pool->len < (1u << order);
	pthread_mutex_unlock(&pool->lock);
	if (!b && fresh)
		b = chunk_carve(pool, ps, order);
	return b;
}

void pwb__pcache_buf_free_order(struct pwb__pcache_bdi *pb, void *b,
				unsigned int order)
{
	struct pwb__page_pool *pool = pb->pool;

	pthread_mutex_lock(&pool->lock);
	put_locked(pool, b, order);
	pthread_mutex_unlock(&pool->lock);
}

void pwb__pcache_buf_free(struct pwb__pcache_bdi *pb, void *b)
{
	pwb__pcache_buf_free_order(pb, b, 0);
}

/* The descriptor of a removed page whose buffer went back at once
 * (page_free_dead() in pcache-lookup.c): not p->data, which another page
 * may own by now. */
void pwb__pcache_page_desc_free_rcu(struct rcu_head *head)
{
	struct pwb__page *p = caa_container_of(head, struct pwb__page, rcu);

	pwb__rcu_callback_begin(p);
	pwb__page_lock_destroy(p);
	free(p);
}

/*
 * The buffers of a reclaim batch go back to the pool at once, not after a
 * grace period: reclaim freed only pages that were clean, not being
 * written and unreferenced, and killed them (reference count dead) before
 * that check, so nobody can take a reference any more; a page's data is
 * only ever touched under a reference or, by a flusher, under a
 * WRITEBACK tag (and get_page refuses a dead page). What a lookup that
 * still finds the dead page reads is its descriptor, which waits for the
 * grace period. Waiting for the buffers too left the writers of a full
 * cache without buffers for as long as the grace period lasted: they
 * mapped new chunks, up to 40% more than cache_bytes in pcache-stream.
 * The other removals (close, truncate, PWB_FADV_DONTNEED, the end of a
 * PWB_RW_DONTCACHE write) do the same, once no write of the page is in
 * flight: a grace period would not cover such a write, the flusher holds
 * no read-side section while the device reads the buffer
 * (page_free_dead() in pcache-lookup.c).
 */
static void buf_put_locked(struct pwb__page_pool *pool, struct pwb__page *p)
{
	put_locked(pool, p->data, p->order);
}

void pwb__pcache_batch_bufs_free(struct pwb__pcache_bdi *pb,
				 struct pwb__page *first)
{
	struct pwb__page_pool *pool = pb->pool;
	struct pwb__page *p;

	pthread_mutex_lock(&pool->lock);
	buf_put_locked(pool, first);
	cds_list_for_each_entry(p, &first->lru, lru)
		buf_put_locked(pool, p);
	pthread_mutex_unlock(&pool->lock);
}

/* A reclaim batch's descriptors: the first page's rcu_head, the others
 * linked through their lru heads (off every list once dead). Their
 * buffers are back in the pool already. */
void pwb__pcache_batch_free_rcu(struct rcu_head *head)
{
	struct pwb__page *first = caa_container_of(head, struct pwb__page, rcu);
	struct pwb__page *p, *tmp;
	struct cds_list_head all;

	/* Pairs with the release after the batch was linked. */
	pwb__rcu_callback_begin(first);
	/* The list of the others, headed by the first page's lru. */
	cds_list_add(&all, &first->lru);
	cds_list_for_each_entry_safe(p, tmp, &all, lru) {
		pwb__page_lock_destroy(p);
		free(p);
	}
}

void pwb__page_pool_init(struct pwb__page_pool *pool, size_t page_size)
{
	memset(pool, 0, sizeof(*pool));
	pool->chunk_bytes = PWB__MAX((size_t)PWB__PCACHE_CHUNK_BYTES,
				     page_size);
	pwb__mutex_init(&pool->lock, PWB__LOCK_PAGE_POOL);
}

void pwb__page_pool_fini(struct pwb__page_pool *pool)
{
	/* The lock only for TSan, which does not see rcu_barrier(). */
	pthread_mutex_lock(&pool->lock);
	while (pool->nr_chunks)
		chunk_release(pool->chunks[--pool->nr_chunks],
			      pool->chunk_bytes);
	free(pool->chunks);
	pool->chunks = NULL;
	pool->free = NULL;
	memset(pool->ffree, 0, sizeof(pool->ffree));
	pool->len = 0;
	pthread_mutex_unlock(&pool->lock);
	pthread_mutex_destroy(&pool->lock);
}
