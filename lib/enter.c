// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * enter.c - how a public call holds a bdi or an inode against its close
 *
 * pwb__bdi_enter/exit and pwb__inode_enter/exit (see enum pwb__hold in
 * bdi.h and doc/design.md, "Closing while calls run"). Every file with a
 * public bdi or inode function calls them; they call only error.c, so
 * those files need not depend on bdi.c or inode.c.
 */
#include "bdi.h"
#include "inode.h"

int pwb__bdi_enter(struct pwb_bdi *bdi, enum pwb__hold hold, const char *who)
{
	bool closing;

	/*
	 * The section opens before the first read of the bdi: a close that
	 * marks it dead afterwards waits for us (synchronize_rcu) before it
	 * frees it, so a call preempted here still finds bdi->lock intact.
	 */
	rcu_read_lock();
	if (pwb__bdi_dead_rcu(bdi)) {
		pwb__rcu_read_unlock();
		if (hold == PWB__HOLD_CLOSE)
			return pwb__err(-EBADF, "the bdi is already being "
						"closed");
		return pwb__bdi_dead_err(who);
	}
	if (hold == PWB__HOLD_RCU)
		return 0;
	pthread_mutex_lock(&bdi->lock);
	closing = bdi->closing;
	if (!closing) {
		if (hold == PWB__HOLD_REF)
			bdi->users++;
		else
			pwb__aset(&bdi->closing, true);
	}
	pthread_mutex_unlock(&bdi->lock);
	pwb__rcu_read_unlock();
	if (!closing)
		return 0;
	if (hold == PWB__HOLD_CLOSE)
		return pwb__err(-EBADF, "the bdi is already being closed");
	return pwb__err(-ESHUTDOWN, "%s: the bdi is being closed", who);
}

void pwb__bdi_exit(struct pwb_bdi *bdi, enum pwb__hold hold)
{
	if (hold == PWB__HOLD_RCU) {
		pwb__rcu_read_unlock();
		return;
	}
	if (hold != PWB__HOLD_REF)
		return;
	/* Once close sees users at 0 it may go on to free the bdi: the
	 * section keeps it intact until our unlock has returned. */
	rcu_read_lock();
	pthread_mutex_lock(&bdi->lock);
	if (--bdi->users == 0 && bdi->closing)
		pthread_cond_broadcast(&bdi->idle_cond);
	pthread_mutex_unlock(&bdi->lock);
	pwb__rcu_read_unlock();
}

int pwb__bdi_dead_err(const char *who)
{
	return pwb__err(-ESHUTDOWN, "%s: the bdi is being closed", who);
}

/* Mark @inode closing unless someone else did. Caller is in a read-side
 * section that began before @inode could be freed. */
static bool claim_close_rcu(struct pwb_inode *inode)
{
	bool claimed;

	pthread_mutex_lock(&inode->lock);
	claimed = !(inode->state & PWB__I_FREEING);
	inode->state |= PWB__I_FREEING;
	pthread_mutex_unlock(&inode->lock);
	return claimed;
}

/* HOLD_RCU is inline in bdi.h; these are HOLD_REF and HOLD_CLOSE. */
int pwb__inode_enter_slow(struct pwb_inode *inode, enum pwb__hold hold,
			  const char *who)
{
	bool freeing = false;
	uint64_t ino;

	/*
	 * Before the first read of the inode: a close frees it with
	 * call_rcu(), after every section that began before its unregister
	 * ended, so a call preempted between here and its first lock still
	 * finds the inode (marked I_FREEING) and its bdi intact.
	 */
	rcu_read_lock();
	if (hold == PWB__HOLD_CLOSE) {
		freeing = !claim_close_rcu(inode);
	} else {
		pthread_mutex_lock(&inode->lock);
		freeing = inode->state & PWB__I_FREEING;
		if (!freeing)
			inode->users++;
		pthread_mutex_unlock(&inode->lock);
	}
	ino = inode->ino;
	pwb__rcu_read_unlock();
	if (!freeing)
		return 0;
	if (hold == PWB__HOLD_CLOSE)
		return pwb__err(-EBADF, "inode %llu is already being closed",
				(unsigned long long)ino);
	return pwb__err(-EBADF, "%s: inode %llu is being closed", who,
			(unsigned long long)ino);
}

void pwb__inode_exit_slow(struct pwb_inode *inode, enum pwb__hold hold)
{
	if (hold != PWB__HOLD_REF)
		return;
	/* A close waiting for users may free the inode once we unlock: the
	 * section keeps it intact until the unlock has returned. */
	rcu_read_lock();
	pthread_mutex_lock(&inode->lock);
	if (--inode->users == 0)
		pthread_cond_broadcast(&inode->users_cond);
	pthread_mutex_unlock(&inode->lock);
	pwb__rcu_read_unlock();
}

bool pwb__inode_claim_close_rcu(struct pwb_inode *inode)
{
	return claim_close_rcu(inode);
}
