// @ts-check
// Markup as tagged templates (htm) made into Preact elements: JSX without a build step.
import { h } from 'preact';
import htm from 'htm';

/**
 * htm's own type takes any value in a template; this one takes `unknown`, so that a function
 * written inline in a template (an event handler) must have its parameters typed: none is `any`.
 * @type {(strings: TemplateStringsArray, ...values: unknown[]) => import('preact').ComponentChildren}
 */
export const html = htm.bind(h);

/**
 * A form's submit event. `currentTarget` is the form only while the handler runs: keep it before an `await`.
 * @typedef {Event & { currentTarget: HTMLFormElement }} FormSubmit
 */

/**
 * A form field's value, as text ('' for a missing one).
 * @param {HTMLFormElement} form
 * @param {string} name
 */
export const field = (form, name) => String(new FormData(form).get(name) ?? '');
