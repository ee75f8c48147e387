// Dates as a namespace's time zone reads them, for the specs of days and visitors.

/** Today's date, yyyy-mm-dd, in `zone`, as the browser's own Intl computes it. */
export function dateIn(zone: string, at = new Date()): string {
  return new Intl.DateTimeFormat("en-CA", { timeZone: zone }).format(at);
}

/** Waits, when a midnight of any of `zones` is less than `marginMs` away, until it has passed:
 * a spec that counts and then reads "today" must not straddle the day's end. */
export async function clearOfMidnight(
  zones: string[],
  marginMs = 15_000,
): Promise<void> {
  const now = Date.now();
  const crossing = zones.some(
    (zone) =>
      dateIn(zone, new Date(now)) !== dateIn(zone, new Date(now + marginMs)),
  );
  if (crossing) await new Promise((r) => setTimeout(r, marginMs + 100));
}
