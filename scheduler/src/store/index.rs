//! The job index of layout 4: one bitmap per partition, `{pK}:job-bits`,
//! with bit `id / partitions` set while job `id` exists (see
//! [`Names::job_bits`](rondo_core::Names::job_bits)).
//!
//! Job ids come from one sequence and a job's partition is
//! `id % partitions`, so the bitmaps are dense: a million ids take about
//! 125 kB in all, where a sorted set of ids cost about 100 bytes a job (an
//! id that was deleted still takes its bit). Bit `b` of partition `p` is
//! job `b * partitions + p`, so byte `j` of every partition together (a
//! *column*) covers the ids `8j * partitions .. 8(j + 1) * partitions`. A
//! page of the whole job list reads a window of columns from the start (or,
//! newest first, from the end) of every partition's bitmap (one `GETRANGE`
//! each, in one pipeline), wide enough for the page's last rank if the ids
//! are dense, and twice as wide again while it was not; it is cut here, in
//! id order, skipping whole columns by their bit counts on the way to the
//! page's first rank. The total is one `BITCOUNT` per partition.
//!
//! A group's page still merges the sorted sets `{pK}:group-job-ids:<app>`
//! (`Store::job_page`).

/// The ids from rank `offset` on, at most `limit`, in a window of the
/// bitmaps: `window[p]` holds partition `p`'s bytes from column `first` on
/// (what `GETRANGE key first last` returns). Ranks count within the
/// window, from its start or (`descending`) from its end.
pub fn cut(
    window: &[Vec<u8>],
    first: usize,
    offset: usize,
    limit: usize,
    descending: bool,
) -> Vec<u64> {
    let bitmaps = window;
    let partitions = bitmaps.len() as u64;
    let columns = bitmaps.iter().map(Vec::len).max().unwrap_or(0);
    if limit == 0 {
        return Vec::new();
    }
    let byte = |p: usize, j: usize| bitmaps[p].get(j).copied().unwrap_or(0);
    let mut skip = offset;
    let mut ids = Vec::with_capacity(limit.min(1024));
    let order: Box<dyn Iterator<Item = usize>> = if descending {
        Box::new((0..columns).rev())
    } else {
        Box::new(0..columns)
    };
    for j in order {
        let in_column: usize = (0..bitmaps.len())
            .map(|p| byte(p, j).count_ones() as usize)
            .sum();
        if in_column <= skip {
            skip -= in_column;
            continue;
        }
        for k in 0..8u32 {
            let k = if descending { 7 - k } else { k };
            for p in 0..bitmaps.len() {
                let p = if descending { bitmaps.len() - 1 - p } else { p };
                if byte(p, j) & (0x80 >> k) == 0 {
                    continue;
                }
                if skip > 0 {
                    skip -= 1;
                    continue;
                }
                ids.push((8 * (first + j) as u64 + u64::from(k)) * partitions + p as u64);
                if ids.len() == limit {
                    return ids;
                }
            }
        }
    }
    ids
}

/// The columns to read first for a page ending at rank `end` of
/// `partitions` bitmaps: enough if the ids are dense, with room for a
/// quarter of them deleted.
pub fn first_window(end: usize, partitions: usize) -> usize {
    (end + end / 4).div_ceil(8 * partitions.max(1)) + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ids set in `bitmaps`: how many there are.
    fn count(bitmaps: &[Vec<u8>]) -> usize {
        bitmaps
            .iter()
            .flat_map(|b| b.iter())
            .map(|byte| byte.count_ones() as usize)
            .sum()
    }

    /// A page of the ids set in whole `bitmaps` (what a window of all
    /// columns cuts) (one per partition, in partition
    /// order, as Redis stores them: bit 0 is the most significant bit of byte
    /// 0), from rank `offset` on, at most `limit`, ascending or (`descending`)
    /// newest first; and how many ids there are in all.
    fn page(
        bitmaps: &[Vec<u8>],
        offset: usize,
        limit: usize,
        descending: bool,
    ) -> (usize, Vec<u64>) {
        let total = count(bitmaps);
        if limit == 0 || offset >= total {
            return (total, Vec::new());
        }
        (total, cut(bitmaps, 0, offset, limit, descending))
    }

    /// Sets job `id`'s bit in `bitmaps` (one per partition), growing the
    /// partition's bitmap as Redis's `SETBIT` would.
    fn set(bitmaps: &mut [Vec<u8>], id: u64) {
        let partitions = bitmaps.len() as u64;
        let (p, bit) = ((id % partitions) as usize, id / partitions);
        let j = (bit / 8) as usize;
        if bitmaps[p].len() <= j {
            bitmaps[p].resize(j + 1, 0);
        }
        bitmaps[p][j] |= 0x80 >> (bit % 8);
    }

    fn bitmaps(partitions: usize, ids: &[u64]) -> Vec<Vec<u8>> {
        let mut maps = vec![Vec::new(); partitions];
        for &id in ids {
            set(&mut maps, id);
        }
        maps
    }

    /// What a page must be: the sorted ids, cut by rank.
    fn expected(ids: &[u64], offset: usize, limit: usize, descending: bool) -> Vec<u64> {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        sorted.dedup();
        if descending {
            sorted.reverse();
        }
        sorted.into_iter().skip(offset).take(limit).collect()
    }

    #[test]
    fn bits_are_laid_out_as_redis_setbit_lays_them() {
        // SETBIT key 0 1 sets the top bit of byte 0; job 3 of 4
        // partitions is bit 0 of partition 3; job 4 is bit 1 of partition 0.
        let maps = bitmaps(4, &[3, 4, 37]);
        assert_eq!(maps[3], vec![0x80]);
        assert_eq!(maps[0], vec![0x40]);
        // 37 = 9 * 4 + 1: bit 9 of partition 1, the second byte's 0x40.
        assert_eq!(maps[1], vec![0x00, 0x40]);
        assert_eq!(page(&maps, 0, 10, false), (3, vec![3, 4, 37]));
    }

    #[test]
    fn pages_are_the_sorted_ids_cut_by_rank_in_both_orders() {
        // Sparse and dense stretches, ids in every partition, a partition
        // with none, and bitmaps of different lengths.
        let mut ids: Vec<u64> = (1..300).filter(|i| i % 7 != 0).collect();
        ids.extend([1000, 1001, 4096, 9999, 65]);
        let partitions = 8;
        let ids: Vec<u64> = ids.into_iter().filter(|i| i % 8 != 5).collect();
        let maps = bitmaps(partitions, &ids);
        let total = expected(&ids, 0, usize::MAX, false).len();
        for descending in [false, true] {
            for offset in [0, 1, 7, 8, 63, 64, 100, total - 1, total, total + 5] {
                for limit in [0, 1, 3, 20, 1000] {
                    assert_eq!(
                        page(&maps, offset, limit, descending),
                        (total, expected(&ids, offset, limit, descending)),
                        "offset {offset} limit {limit} descending {descending}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_window_cuts_the_same_ids_as_the_whole() {
        let ids: Vec<u64> = (0..500).filter(|i| i % 3 != 1).collect();
        let maps = bitmaps(4, &ids);
        let columns = maps.iter().map(Vec::len).max().unwrap();
        // From the start: columns 0..5 of each partition.
        let head: Vec<Vec<u8>> = maps.iter().map(|m| m[..5.min(m.len())].to_vec()).collect();
        assert_eq!(cut(&head, 0, 10, 20, false), expected(&ids, 10, 20, false));
        // From the end: the last 5 columns, ids counted from the newest.
        let from = columns - 5;
        let tail: Vec<Vec<u8>> = maps
            .iter()
            .map(|m| m.get(from..).map(<[u8]>::to_vec).unwrap_or_default())
            .collect();
        assert_eq!(cut(&tail, from, 3, 20, true), expected(&ids, 3, 20, true));
        // A window too narrow for the page gives what it has.
        assert_eq!(cut(&head, 0, 0, 1000, false).len(), count(&head));
        assert!(first_window(100, 4) * 8 * 4 >= 125);
    }

    #[test]
    fn no_jobs_is_an_empty_page() {
        assert_eq!(
            page(&[Vec::new(), Vec::new()], 0, 10, false),
            (0, Vec::new())
        );
        assert_eq!(page(&[vec![0, 0]], 0, 10, true), (0, Vec::new()));
    }
}
