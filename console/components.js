// @ts-check
// The pieces the views are made of: a table that reads as cards at phone width, an error line.
import { html } from './html.js';

/**
 * @typedef {import('preact').ComponentChildren} Children
 */

/**
 * One column: its header, and what each row shows in it.
 * @template T
 * @typedef {object} Column
 * @property {string} title its header, and each cell's label at phone width
 * @property {(row: T) => Children} cell
 * @property {boolean} [rowHeader] the row's header cell (`<th scope="row">`, the first column)
 * @property {boolean} [srOnly] a header for screen readers only (a column of buttons)
 * @property {(row: T) => string} [cellClass] the cell's class (`good`, `warn`)
 */

/**
 * @template T
 * @typedef {object} TableProps
 * @property {Children} caption
 * @property {Column<T>[]} columns
 * @property {readonly T[]} rows
 * @property {(row: T) => string} [rowKey] a row's identity, kept across refreshes
 * @property {(row: T) => Record<string, string>} [rowAttrs] a row's attributes (`data-*`, `class`)
 */

/**
 * A table in its own scrolling box. At phone width style.css shows each row as a card, each cell
 * under its column's name: the cells carry that name (`data-label`) themselves.
 * Views build their props with the type (`@type {TableProps<Row>}`) and spread them in (`...${props}`).
 * @template T
 * @param {TableProps<T>} props
 */
export function Table({ caption, columns, rows, rowKey, rowAttrs }) {
  return html`<div class="scroll"><table>
    <caption>${caption}</caption>
    <thead><tr>${columns.map((c) => html`<th scope="col">${c.srOnly ? html`<span class="sr">${c.title}</span>` : c.title}</th>`)}</tr></thead>
    <tbody>${rows.map(
      (row, i) => html`<tr key=${rowKey ? rowKey(row) : i} ...${rowAttrs?.(row) ?? {}}>${columns.map((c) =>
        c.rowHeader ? html`<th scope="row">${c.cell(row)}</th>` : html`<td data-label=${c.title} class=${c.cellClass?.(row)}>${c.cell(row)}</td>`,
      )}</tr>`,
    )}</tbody>
  </table></div>`;
}

/**
 * A failure, read out at once; nothing when there is none.
 * @param {{ text: string }} props
 */
export const ErrorText = ({ text }) => text && html`<p role="alert" class="error">${text}</p>`;
