// The course site's scripts. First, its search (Sphinx's own searchtools.js, two of its documented hooks).
//
// Ranking: Sphinx scores a query found in a page title alike for every page and then sorts equal
// scores alphabetically, so "attention" listed the API modules and the exercises before lesson 03.
// Lessons come first here, then exercises, then the API reference; among equal scores the shorter
// title first (the page whose title is most nearly the query: "Self-attention" before
// "Introduction: why attention"). The weights are Sphinx's defaults.
var Scorer = {
  score: (result) => {
    const [docname, title, , , score] = result;
    const section = docname.startsWith("notebooks/") ? 30 : docname.startsWith("exercises/") ? 10 : 0;
    return score + section - title.length / 100;
  },
  objNameMatch: 11,
  objPartialMatch: 6,
  objPrio: { 0: 15, 1: 5, 2: -5 },
  objPrioDefault: 0,
  title: 15,
  partialTitle: 7,
  term: 5,
  partialTerm: 2,
};

// Snippets: Sphinx takes a result's text from the page's [role=main], which in this theme also holds
// the article's header buttons (the colour-mode menu read "Light Dark"). Those are left out.
document.addEventListener("DOMContentLoaded", () => {
  if (typeof Search === "undefined" || !Search.htmlToText) return;
  const pageText = Search.htmlToText;
  Search.htmlToText = (htmlString, anchor) => {
    const page = new DOMParser().parseFromString(htmlString, "text/html");
    page.querySelectorAll(".bd-header-article, .lesson-links, .bd-sidebar-secondary, .prev-next-area, footer")
      .forEach((element) => element.remove());
    return pageText(page.documentElement.outerHTML, anchor);
  };
});

// Navigation: module and method names ("minitransformer.checks.lesson03") have no spaces, so
// the sidebars broke them at any letter ("minitransformer.decodin|g"). Allow breaks only after a dot
// or an underscore (course.css turns the letter-by-letter breaking off there).
document.addEventListener("DOMContentLoaded", () => {
  document.querySelectorAll(".bd-sidebar-primary a, .bd-sidebar-secondary a").forEach((link) => {
    const walker = document.createTreeWalker(link, NodeFilter.SHOW_TEXT);
    const texts = [];
    while (walker.nextNode()) texts.push(walker.currentNode);
    for (const text of texts) {
      const value = text.nodeValue;
      if (/\s/.test(value.trim()) || !/[._]/.test(value)) continue;  // words break at spaces already
      const pieces = value.split(/(?<=[._])/);
      const fragment = document.createDocumentFragment();
      pieces.forEach((piece, k) => {
        fragment.append(piece);
        if (k < pieces.length - 1) fragment.append(document.createElement("wbr"));
      });
      text.replaceWith(fragment);
    }
    link.classList.add("name-breaks");
  });
});
