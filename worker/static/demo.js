// The demo page's script: counts this view, shows the likes, and counts a like per click,
// all through the browser client the worker serves.
import { createClient, EdgecountError } from "/v1/client.js";

const edgecount = createClient({ baseUrl: location.origin });
const views = document.getElementById("views");
const likes = document.getElementById("likes");
const like = document.getElementById("like");
const status = document.getElementById("status");

function explain(error) {
  if (error instanceof EdgecountError && error.status === 401) {
    return "This deployment needs a token to count; the counters above are read-only here.";
  }
  return `Could not reach the counters: ${error.message}`;
}

async function start() {
  try {
    // Both calls go out together in one batch request.
    const [viewCount, likeCount] = await Promise.all([
      edgecount.incr("demo", "page-views"),
      edgecount.get("demo", "likes"),
    ]);
    views.textContent = String(viewCount);
    likes.textContent = String(likeCount);
    like.disabled = false;
  } catch (error) {
    status.textContent = explain(error);
  }
}

like.addEventListener("click", async () => {
  like.disabled = true;
  try {
    likes.textContent = String(await edgecount.incr("demo", "likes"));
    status.textContent = "";
  } catch (error) {
    status.textContent = explain(error);
  } finally {
    like.disabled = false;
  }
});

start();
