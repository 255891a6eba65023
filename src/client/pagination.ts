/** Cursor pages: one page at a time, or every item across pages with `for await`. */
import { PolicyloopError } from '../internal/errors.js';

/** The wire shape of a cursor page. */
export interface PageBody<Item> {
  /** Always `list`. */
  object: string;
  /** The items of the page. */
  data: Item[];
  /** The id of the first item ('' when empty). */
  first_id: string;
  /** The id of the last item ('' when empty): the `after` cursor of the next page. */
  last_id: string;
  /** Whether more items follow. */
  has_more: boolean;
}

/** Fetches the page that starts after the item with id `after` (`undefined` for the first page). */
export type PageFetcher<Item> = (after: string | undefined) => Promise<PageBody<Item>>;

/**
 * One page of a cursor-paginated list: the wire fields (`data`, `has_more`, `first_id`,
 * `last_id`) plus navigation. Iterating a page with `for await` yields its items and then those
 * of every following page.
 * @example
 * let page = await client.checkpoints.list(modelId, { limit: 10 });
 * while (true) {
 *   for (const checkpoint of page.data) console.log(checkpoint.step);
 *   if (!page.hasNextPage()) break;
 *   page = await page.getNextPage();
 * }
 */
export class Page<Item extends { id: string }> implements AsyncIterable<Item> {
  /** Always `list`. */
  readonly object: string;
  /** The items of this page. */
  readonly data: Item[];
  /** Whether more items follow this page. */
  readonly has_more: boolean;
  /** The id of the first item ('' when empty). */
  readonly first_id: string;
  /** The id of the last item ('' when empty): the cursor of the next page. */
  readonly last_id: string;
  readonly #fetchPage: PageFetcher<Item>;
  readonly #after: string | undefined;

  /**
   * @param body The page as the service sent it.
   * @param fetchPage Fetches the page after a cursor (same query and options).
   * @param after The cursor this page was fetched with (`undefined` for the first page).
   */
  constructor(body: PageBody<Item>, fetchPage: PageFetcher<Item>, after?: string) {
    this.object = body.object;
    this.data = body.data;
    this.has_more = body.has_more;
    this.first_id = body.first_id;
    this.last_id = body.last_id;
    this.#fetchPage = fetchPage;
    this.#after = after;
  }

  /** The cursor of the next page: `last_id`, or the last item's id when the service left it blank. */
  nextCursor(): string | undefined {
    const cursor = this.last_id !== '' ? this.last_id : this.data.at(-1)?.id;
    return cursor === undefined || cursor === '' ? undefined : cursor;
  }

  /** True when `has_more` is set and there is a cursor to continue from. */
  hasNextPage(): boolean {
    return this.has_more && this.nextCursor() !== undefined;
  }

  /**
   * Fetches the next page (same query and options, `after` = this page's `last_id`).
   * Throws when there is none: check {@link hasNextPage} first. Also throws when the service
   * says `has_more` but hands back the cursor this page was fetched with, which would otherwise
   * make `for await` request the same page forever.
   */
  async getNextPage(): Promise<Page<Item>> {
    const cursor = this.hasNextPage() ? this.nextCursor() : undefined;
    if (cursor === undefined) {
      throw new PolicyloopError(
        'No next page: `has_more` is false. Check `page.hasNextPage()` before `getNextPage()`.',
      );
    }
    if (cursor === this.#after) {
      throw new PolicyloopError(
        `The service answered \`has_more: true\` with the same cursor it was asked for (after=${cursor}): ` +
          'expected the id of the last item of this page. Stopping rather than requesting the same page forever.',
      );
    }
    return new Page(await this.#fetchPage(cursor), this.#fetchPage, cursor);
  }

  /** This page and every following one, fetched as the loop reaches them. */
  async *iterPages(): AsyncGenerator<Page<Item>, void, undefined> {
    let page: Page<Item> = this;
    yield page;
    while (page.hasNextPage()) {
      page = await page.getNextPage();
      yield page;
    }
  }

  /** Every item of this page and of the pages after it. */
  async *[Symbol.asyncIterator](): AsyncGenerator<Item, void, undefined> {
    for await (const page of this.iterPages()) yield* page.data;
  }
}

/**
 * The result of a list call: `await` it for the first {@link Page}, or iterate it with
 * `for await` to get every item across pages (following `after = last_id` until `has_more` is
 * false). The first request is sent when it is first awaited or iterated, and only once.
 * @example
 * for await (const event of client.jobs.events(jobId)) console.log(event.type);
 * const first = await client.jobs.events(jobId, { limit: 5 });
 */
export class PagePromise<Item extends { id: string }> implements PromiseLike<Page<Item>>, AsyncIterable<Item> {
  readonly #fetchPage: PageFetcher<Item>;
  readonly #after: string | undefined;
  #page: Promise<Page<Item>> | undefined;

  /**
   * @param fetchPage Fetches the page after a cursor (`undefined` for the first page).
   * @param after The cursor of the first page, when the caller resumes a list.
   */
  constructor(fetchPage: PageFetcher<Item>, after?: string) {
    this.#fetchPage = fetchPage;
    this.#after = after;
  }

  /**
   * A page promise that rejects with `error` when awaited or iterated: list methods use it for
   * bad arguments, so that every method reports them the same way (a rejection, before any request).
   */
  static reject<Item extends { id: string }>(error: unknown): PagePromise<Item> {
    return new PagePromise<Item>(() => Promise.reject(error));
  }

  #load(): Promise<Page<Item>> {
    this.#page ??= this.#fetchPage(this.#after).then((body) => new Page(body, this.#fetchPage, this.#after));
    return this.#page;
  }

  /** Resolves to the first page. */
  then<Result = Page<Item>, Rejected = never>(
    onFulfilled?: ((page: Page<Item>) => Result | PromiseLike<Result>) | null,
    onRejected?: ((reason: unknown) => Rejected | PromiseLike<Rejected>) | null,
  ): Promise<Result | Rejected> {
    return this.#load().then(onFulfilled, onRejected);
  }

  /** Like `Promise.prototype.catch`, for the first page. */
  catch<Rejected = never>(
    onRejected?: ((reason: unknown) => Rejected | PromiseLike<Rejected>) | null,
  ): Promise<Page<Item> | Rejected> {
    return this.#load().catch(onRejected);
  }

  /** Like `Promise.prototype.finally`, for the first page. */
  finally(onFinally?: (() => void) | null): Promise<Page<Item>> {
    return this.#load().finally(onFinally);
  }

  /** Every item across pages. */
  async *[Symbol.asyncIterator](): AsyncGenerator<Item, void, undefined> {
    yield* await this.#load();
  }
}
