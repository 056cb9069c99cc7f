// An intent's life: the step that opened it, its frames, its receipt or
// drops, in journal order.
import { h, replace, table } from '../dom.js';
import { get } from '../api.js';
import { journalPath } from '../links.js';
import { detail } from './cell.js';

export async function intentView(ctx, hash) {
  const entries = await get('/v1/intents/' + encodeURIComponent(hash), ctx.signal);
  replace(ctx.main, h('h1', {}, 'Intent ', h('span', { class: 'mono', id: 'intent-hash' }, hash)),
    table(['Seq', 'Kind', 'What'], entries.map((e) => [h('a', { href: journalPath(e.seq), class: 'mono' }, String(e.seq)),
      h('span', { class: 'kind kind-' + e.kind }, e.kind), detail(e)]), (i) => ({ 'data-kind': entries[i].kind })));
}
